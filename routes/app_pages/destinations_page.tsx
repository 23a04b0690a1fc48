/**
 * The destinations page: each of the brand's webhook destinations with its delivery health
 * (pending, dead, delivered in 24 hours, the last delivery and error, changes not yet batched),
 * read through lib/audiences/deliveries.ts as `deno task admin destinations list` is.
 *
 * @module
 */
import { destinationsHealth } from "../../lib/audiences/deliveries.ts";
import type { AppDeps } from "../../lib/http/app_env.ts";
import { Card, DataTable, Layout } from "./layout.tsx";
import type { PageContext } from "./page_context.ts";

/** Renders the brand's destinations and their delivery health. */
export async function destinationsPage(deps: AppDeps, page: PageContext, scope: string) {
  const destinations = await destinationsHealth(deps.sql, scope, deps.now());
  const failing = destinations.filter((d) => d.dead > 0 || d.pending > 0);
  return (
    <Layout title="Destinations" page={page} active="destinations">
      <h1>Destinations</h1>
      <p class="subdued">
        {destinations.length}{" "}
        webhook destinations. Defined through POST /cdp/destinations; dead deliveries are sent again
        with deno task admin destinations replay.
      </p>
      {failing.length > 0 && (
        <div class="banner critical" data-notice="failing">
          {failing.length} destinations have deliveries waiting or dead.
        </div>
      )}
      <div class="grid">
        <Card title="Delivery health" id="destinations">
          <DataTable
            id="destinations"
            caption="Delivered: the last 24 hours. Backlog: changes not yet made into deliveries."
            columns={[
              { label: "Destination" },
              { label: "URL" },
              { label: "Segments", numeric: true },
              { label: "Delivered", numeric: true },
              { label: "Pending", numeric: true },
              { label: "Dead", numeric: true },
              { label: "Backlog", numeric: true },
              { label: "Last delivery" },
              { label: "Last error" },
            ]}
            rows={destinations.map((d) => [
              <span title={d.id}>{d.name}</span>,
              <span class="mono">{d.url}</span>,
              String(d.segments),
              String(d.delivered24h),
              String(d.pending),
              String(d.dead),
              String(d.backlog),
              d.lastDeliveredAt ?? "never",
              d.lastError ?? "",
            ])}
          />
        </Card>
      </div>
    </Layout>
  );
}
