/**
 * Running privacy requests in tests as the service does: the forwarder over the context's queue,
 * with the `privacy_request` job the runtime registers.
 */
import { startForwarder } from "../../../lib/ingest/forwarder.ts";
import type { IngestQueue } from "../../../lib/ingest/queue.ts";
import { lazyIdentifierHasher } from "../../../lib/privacy/identifiers.ts";
import { createPrivacyJob, type PrivacyJobDeps } from "../../../lib/privacy/requests.ts";
import { privacyExportBudget } from "../../../lib/runtime/runtime.ts";
import { eventually, type TestContext } from "../../test_support.ts";

/** The context's `privacy_request` job, as the runtime builds it. */
export function privacyJob(
  ctx: TestContext,
  extra: Partial<PrivacyJobDeps> = {},
): (message: unknown) => Promise<void> {
  return createPrivacyJob({
    sql: ctx.sql,
    now: ctx.clock.now,
    hasher: lazyIdentifierHasher(ctx.kv, ctx.config.tokenEncryptionKey),
    exportBudget: privacyExportBudget(ctx.config),
    ...extra,
  });
}

/**
 * Starts the forwarder on `queue` (the context's by default) with the privacy job; a KV queue's
 * listener ends when the context closes, an outbox's when it is stopped.
 */
export function startPrivacyForwarder(
  ctx: TestContext,
  queue: IngestQueue = ctx.queue,
  extra: Partial<PrivacyJobDeps> = {},
): Promise<void> {
  return startForwarder({
    queue,
    engine: ctx.deps.engine,
    now: ctx.clock.now,
    jobs: { privacy_request: privacyJob(ctx, extra) },
  });
}

/** Posts a request and waits until the forwarder has completed (or failed) it. */
export async function requestAndWait(
  ctx: TestContext,
  key: string,
  body: { type: string; identifier: string },
): Promise<Record<string, unknown>> {
  const res = await ctx.request("/cdp/privacy/requests", key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const created = await res.json();
  if (res.status !== 202) throw new Error(`${res.status} ${JSON.stringify(created)}`);
  let view: Record<string, unknown> = created;
  await eventually(async () => {
    view = await (await ctx.request(`/cdp/privacy/requests/${created.id}`, key)).json();
    return view.status === "completed" || view.status === "failed";
  });
  return view;
}

/** Sends events through `POST /cdp/events` (sync unless `async`), asserting the answer. */
export async function sendEvents(
  ctx: TestContext,
  key: string,
  events: Record<string, unknown>[],
  options: { async?: boolean } = {},
): Promise<void> {
  const res = await ctx.request(`/cdp/events${options.async ? "" : "?sync=true"}`, key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ events }),
  });
  const body = await res.json();
  if (res.status !== (options.async ? 202 : 200) || body.rejected.length > 0) {
    throw new Error(`${res.status} ${JSON.stringify(body)}`);
  }
}
