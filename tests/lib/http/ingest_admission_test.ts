import assert from "node:assert/strict";
import { Hono } from "hono";
import { onError } from "../../../lib/http/errors.ts";
import { ingestAdmission } from "../../../lib/http/ingest_admission.ts";
import { BACKLOG_CACHE_MS } from "../../../lib/ingest/queue.ts";
import { enqueueBatch, kvQueue } from "../../test_support.ts";

/** An app whose ingest handler holds every request until `release` is called. */
function heldApp(backlog: () => Promise<number>) {
  const admission = ingestAdmission({
    maxInFlight: 6,
    backloggedInFlight: 2,
    softBacklog: 100,
    backlog,
  });
  const app = new Hono();
  app.onError(onError);
  app.use("/cdp/events", admission.middleware);
  let release!: () => void;
  const held = new Promise<void>((resolve) => release = resolve);
  let entered = 0;
  app.post("/cdp/events", async (c) => {
    entered++;
    await held;
    return c.json({ accepted: 1 }, 202);
  });
  return { app, admission, release, entered: () => entered };
}

/** Sends `n` requests at once; resolves to their statuses once the handler was reached or refused. */
async function offer(app: Hono, n: number, query = "") {
  const responses = Array.from(
    { length: n },
    () => app.request(`/cdp/events${query}`, { method: "POST", body: "{}" }),
  );
  // Let every request pass the admission check before looking.
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 0));
  return responses;
}

Deno.test("ingestAdmission: a backlog over the soft threshold works on fewer requests at once; the rest wait", async () => {
  const cases: [number, number][] = [[0, 6], [100, 6], [101, 2], [5_000, 2]];
  for (const [backlog, bound] of cases) {
    const { app, admission, release, entered } = heldApp(() => Promise.resolve(backlog));
    const pending = await offer(app, 10);
    assert.equal(entered(), bound, `backlog ${backlog}`);
    assert.equal(admission.inFlight, bound);
    assert.equal(admission.waiting, 6 - bound);
    assert.equal(admission.bound, bound);
    release();
    const responses = await Promise.all(pending);
    const refused = responses.filter((r) => r.status === 503);
    // Held requests (in progress or waiting) are served; only those past maxInFlight are refused.
    assert.equal(responses.filter((r) => r.status === 202).length, 6);
    assert.equal(refused.length, 4);
    const body = await refused[0]!.json();
    assert.equal(body.error, "queue_full");
    assert.equal(refused[0]!.headers.get("Retry-After"), "1");
    assert.equal(entered(), 6);
    assert.equal(admission.inFlight, 0);
    assert.equal(admission.waiting, 0);
  }
});

Deno.test("ingestAdmission: finished requests free their places; sync requests are not counted", async () => {
  const { app, admission, release, entered } = heldApp(() => Promise.resolve(500));
  const sync = await offer(app, 4, "?sync=true");
  const first = await offer(app, 3);
  assert.equal(entered(), 4 + 2);
  assert.equal(admission.inFlight, 2);
  assert.equal(admission.waiting, 1);
  release();
  const statuses = (await Promise.all([...sync, ...first])).map((r) => r.status);
  assert.deepEqual(statuses, [202, 202, 202, 202, 202, 202, 202]);
  assert.equal(entered(), 4 + 3);
  const again = await Promise.all(await offer(app, 2));
  assert.deepEqual(again.map((r) => r.status), [202, 202]);
});

Deno.test("ingestAdmission: waiting requests start, oldest first, once the backlog is back under the threshold", async () => {
  let backlog = 500;
  const { app, admission, release, entered } = heldApp(() => Promise.resolve(backlog));
  const first = await offer(app, 4);
  assert.equal(entered(), 2);
  assert.equal(admission.waiting, 2);
  backlog = 0;
  const next = await offer(app, 1);
  assert.equal(entered(), 5);
  assert.equal(admission.waiting, 0);
  assert.equal(admission.bound, 6);
  release();
  const statuses = (await Promise.all([...first, ...next])).map((r) => r.status);
  assert.deepEqual(statuses, [202, 202, 202, 202, 202]);
});

Deno.test("ingestAdmission: an unreadable backlog lets the request through to the queue's own answer", async () => {
  const { app, release, entered } = heldApp(() => Promise.reject(new Error("queue closed")));
  release();
  const responses = await Promise.all(await offer(app, 3));
  assert.deepEqual(responses.map((r) => r.status), [202, 202, 202]);
  assert.equal(entered(), 3);
});

Deno.test("estimatedBacklog: counts what was enqueued and not yet retired", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const queue = kvQueue(kv);
    assert.equal(await queue.estimatedBacklog(), 0);
    let n = 0;
    const events = Array.from(
      { length: 3 },
      (_, i) => ({ id: `e${i}`, eventType: "view", profileId: `p${i}` }),
    );
    await enqueueBatch(kv, {
      brandId: "b1",
      batch: {
        scope: "shop.example",
        source: "server",
        receivedAt: "2026-01-01T00:00:00.000Z",
        events,
      },
      newId: () => `m${n++}`,
    });
    // The estimate is cached per process for a moment; the next read sees the enqueue.
    await new Promise((resolve) => setTimeout(resolve, BACKLOG_CACHE_MS + 10));
    assert.equal(await queue.estimatedBacklog(), 3);
  } finally {
    kv.close();
  }
});
