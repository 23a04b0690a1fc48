/**
 * The health page: the ingest backlog, the brand's dead letters, the messages refused inside its
 * accepted requests, the last webhook its shop sent and the last backfill (when the deployment
 * has a backfill source).
 *
 * @module
 */
import type { AppDeps } from "../../lib/http/app_env.ts";
import { brandHealth } from "../../lib/dashboard/health.ts";
import { Card, DataTable, Layout } from "./layout.tsx";
import type { PageContext } from "./page_context.ts";

/** Renders the brand's health. */
export async function healthPage(deps: AppDeps, page: PageContext) {
  const health = await brandHealth(deps, {
    brandId: page.brand.brandId,
    shop: page.session.shop,
  });
  const webhook = health.lastWebhook;
  const backfill = health.lastBackfill;
  return (
    <Layout title="Health" page={page} active="health">
      <h1>Health</h1>
      <div class="stats">
        <div class="stat" data-stat="backlog">
          <div class="subdued">Ingest backlog (all brands)</div>
          <div class="value">{health.backlog}</div>
        </div>
        <div class="stat" data-stat="dead-letters">
          <div class="subdued">Dead letters</div>
          <div class="value">{health.deadLetterCount}</div>
        </div>
        <div class="stat" data-stat="rejected">
          <div class="subdued">Refused messages</div>
          <div class="value">{health.rejectedCount}</div>
        </div>
        <div class="stat" data-stat="last-webhook">
          <div class="subdued">Last webhook</div>
          <div class="value">
            {webhook ? webhook.receivedAt.slice(0, 16).replace("T", " ") : "none"}
          </div>
          {webhook && <div class="subdued">{webhook.topic}: {webhook.outcome}</div>}
        </div>
        <div class="stat" data-stat="last-backfill">
          <div class="subdued">Last backfill</div>
          <div class="value">
            {backfill ? backfill.state : "none"}
          </div>
          {backfill && (
            <div class="subdued">
              {backfill.startedAt.slice(0, 16).replace("T", " ")}
              {backfill.finishedAt
                ? ` to ${backfill.finishedAt.slice(0, 16).replace("T", " ")}`
                : ""}
              {backfill.detail ? ` · ${backfill.detail}` : ""}
            </div>
          )}
        </div>
      </div>
      <div class="grid">
        <Card title="Latest dead letters" id="dead-letters">
          <p class="formula">
            Event batches the forwarder gave up on; replay them with `deno task admin deadletter
            replay`.
          </p>
          <DataTable
            id="dead-letters"
            caption={`${health.deadLetterCount} dead letters`}
            columns={[
              { label: "Id" },
              { label: "Failed at" },
              { label: "Events", numeric: true },
              { label: "Reason" },
            ]}
            rows={health.deadLetters.map((letter) => [
              <span class="mono">{letter.id}</span>,
              letter.failedAt ?? "",
              letter.message.batch.events.length,
              letter.reason,
            ])}
          />
        </Card>
        <Card title="Latest refused messages" id="rejected">
          <p class="formula">
            Messages refused one by one inside requests that were accepted (the Segment door answers
            200); list them with `deno task admin rejected list`.
          </p>
          <DataTable
            id="rejected"
            caption={`${health.rejectedCount} refused messages`}
            columns={[
              { label: "At" },
              { label: "Door" },
              { label: "Index", numeric: true },
              { label: "Reason" },
            ]}
            rows={health.rejected.map((message) => [
              message.at,
              message.door,
              message.index,
              message.errors.map((e) => `${e.path}: ${e.message}`).join("; "),
            ])}
          />
        </Card>
      </div>
    </Layout>
  );
}
