/**
 * The API keys page: the brand's keys, and forms to issue, rotate and revoke them, each carrying
 * the page session and its CSRF token. The plaintext of a new key is shown once, in the answer to
 * the form that made it.
 *
 * @module
 */
import { type ApiKeyRecord, isLive, listApiKeys } from "../../lib/tenancy/api_keys.ts";
import type { AppDeps } from "../../lib/http/app_env.ts";
import { Card, DataTable, Layout } from "./layout.tsx";
import { type PageContext, SESSION_PARAM } from "./page_context.ts";

/** The CSRF field of the key forms. */
export const CSRF_FIELD = "csrf";

/** What a key form did: a new key to show once, or a failure to explain. */
export type KeyNotice =
  | {
    kind: "issued";
    key: string;
    record: ApiKeyRecord;
    previous?: { id: string; expires_at: string };
  }
  | { kind: "revoked"; record: ApiKeyRecord }
  | { kind: "error"; status: 400 | 404 | 409; message: string };

/** Renders the keys page, with the notice of the form just submitted. */
export async function keysPage(deps: AppDeps, page: PageContext, notice?: KeyNotice) {
  const keys = await listApiKeys(deps.kv, page.brand.brandId);
  const now = deps.now();
  return (
    <Layout title="API keys" page={page} active="keys">
      <h1>API keys</h1>
      <p class="subdued">
        Keys authenticate the brand's calls to /cdp. Rotating keeps the old key working for{" "}
        {deps.config.keyRotationGraceSeconds / 3600} hours.
      </p>
      {notice?.kind === "issued" && (
        <div class="banner success" data-notice="issued">
          <strong>New key {notice.record.prefix}…: copy it now, it is not shown again.</strong>
          <p class="mono" data-plaintext>{notice.key}</p>
          {notice.previous && (
            <p>
              The previous key {notice.previous.id} stops working at {notice.previous.expires_at}.
            </p>
          )}
        </div>
      )}
      {notice?.kind === "revoked" && (
        <div class="banner info" data-notice="revoked">Key {notice.record.id} is revoked.</div>
      )}
      {notice?.kind === "error" && (
        <div class="banner critical" data-notice="error">{notice.message}</div>
      )}
      <div class="grid">
        <Card title="Issue a key" id="issue">
          <form method="post" action="/app/keys/issue">
            <Hidden page={page} />
            <input type="text" name="name" maxlength={100} placeholder="Label, e.g. backend" />{" "}
            <button type="submit">Issue key</button>
          </form>
        </Card>
      </div>
      <div class="grid">
        <Card title="Keys" id="keys">
          <DataTable
            id="keys"
            caption={`${keys.length} keys, oldest first`}
            columns={[
              { label: "Key" },
              { label: "Name" },
              { label: "Created" },
              { label: "Last used" },
              { label: "Status" },
              { label: "" },
            ]}
            rows={keys.map((key) => {
              const live = isLive(key, now);
              return [
                <span class="mono" title={key.id}>{key.prefix}…</span>,
                key.name ?? "",
                key.created_at.slice(0, 16).replace("T", " "),
                key.last_used_at?.slice(0, 16).replace("T", " ") ?? "never",
                key.revoked_at
                  ? "revoked"
                  : live
                  ? (key.expires_at
                    ? `expires ${key.expires_at.slice(0, 16).replace("T", " ")}`
                    : "active")
                  : "expired",
                live
                  ? (
                    <span>
                      <form method="post" action="/app/keys/rotate" class="inline">
                        <Hidden page={page} />
                        <input type="hidden" name="id" value={key.id} />
                        <button type="submit" class="secondary">Rotate</button>
                      </form>{" "}
                      <form method="post" action="/app/keys/revoke" class="inline">
                        <Hidden page={page} />
                        <input type="hidden" name="id" value={key.id} />
                        <button type="submit" class="critical">Revoke</button>
                      </form>
                    </span>
                  )
                  : "",
              ];
            })}
          />
        </Card>
      </div>
    </Layout>
  );
}

function Hidden(props: { page: PageContext }) {
  return (
    <>
      <input type="hidden" name={SESSION_PARAM} value={props.page.token} />
      <input type="hidden" name={CSRF_FIELD} value={props.page.csrf} />
    </>
  );
}
