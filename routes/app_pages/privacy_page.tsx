/**
 * The privacy page: the brand's data-subject requests (the API's and Shopify's customers/redact
 * and customers/data_request), newest first, with a download of each completed export.
 *
 * @module
 */
import type { AppDeps } from "../../lib/http/app_env.ts";
import { listRequests } from "../../lib/privacy/requests.ts";
import { Card, DataTable, Layout } from "./layout.tsx";
import type { PageContext } from "./page_context.ts";

/** Requests shown on one page. */
const _PAGE = 50;

/** Renders the privacy page at `offset`. */
export async function privacyPage(deps: AppDeps, page: PageContext, offset: number) {
  const { list, total } = await listRequests(deps.sql, page.brand.brandId, {
    limit: _PAGE,
    offset,
  });
  const when = (iso: string | null) => iso?.slice(0, 16).replace("T", " ") ?? "";
  return (
    <Layout title="Privacy" page={page} active="privacy">
      <h1>Privacy requests</h1>
      <p class="subdued">
        Erasures, exports and suppressions asked through the API or by Shopify. An export is ready
        to download once completed; an erased person's identifier is not kept.
      </p>
      <div class="grid">
        <Card title="Requests" id="privacy">
          <DataTable
            id="privacy"
            caption={`${total} requests, newest first`}
            columns={[
              { label: "Asked" },
              { label: "Type" },
              { label: "Who" },
              { label: "By" },
              { label: "Status" },
              { label: "Completed" },
              { label: "Counts" },
              { label: "" },
            ]}
            rows={list.map((request) => [
              when(request.created_at),
              request.type,
              request.identifier ?? <span class="subdued">erased</span>,
              <span class="mono">{request.requested_by}</span>,
              request.error ? `${request.status}: ${request.error}` : request.status,
              when(request.completed_at),
              <span class="mono">
                {Object.entries(request.counts).map(([k, v]) => `${k} ${v}`).join(", ")}
              </span>,
              request.download_available
                ? <a href={page.link(`/app/privacy/${request.id}/download`)}>Download</a>
                : "",
            ])}
          />
          {offset + _PAGE < total && (
            <p class="pager">
              <a href={page.link("/app/privacy", { offset: offset + _PAGE })}>Older requests</a>
            </p>
          )}
        </Card>
      </div>
    </Layout>
  );
}
