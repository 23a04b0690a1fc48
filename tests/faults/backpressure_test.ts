/**
 * Backpressure: past INGEST_MAX_BACKLOG queued events, async ingest (server and pixel) answers
 * 503 `queue_full` with Retry-After and accepts nothing; once the forwarder drains the queue it
 * answers 202 again, and the KV file the backlog filled is reused rather than grown.
 */
import assert from "node:assert/strict";
import { readBacklog } from "../../lib/ingest/queue.ts";
import { createQueueHandler, startForwarder } from "../../lib/ingest/forwarder.ts";
import { errorBody, eventually, type TestContext, withContext } from "../test_support.ts";

const view = (profileId: string) => ({
  eventType: "page_viewed",
  profileId,
  properties: { url: `https://x/products/${profileId}`, title: `Product ${profileId}` },
});

function batch(size: number, prefix: string) {
  return { events: Array.from({ length: size }, (_, i) => view(`${prefix}${i}`)) };
}

function post(ctx: TestContext, key: string, body: unknown, query = ""): Promise<Response> {
  return ctx.request(`/cdp/events${query}`, key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

function pixel(ctx: TestContext, shop: string, body: unknown): Promise<Response> {
  return Promise.resolve(ctx.app.request(`/cdp/ingest?shop=${encodeURIComponent(shop)}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Origin: `https://${shop}` },
    body: JSON.stringify(body),
  }));
}

async function eventCount(ctx: TestContext): Promise<number> {
  return (await ctx.sql`select count(*)::int as n from events`)[0]!.n;
}

async function assertQueueFull(res: Response): Promise<void> {
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "5");
  const body = await errorBody(res);
  assert.equal(body.error, "queue_full");
  assert.match(body.error_description, /no events were accepted/);
}

Deno.test("backpressure: past INGEST_MAX_BACKLOG async ingest is 503 queue_full, accepting nothing; 202 again once drained", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    assert.equal((await post(ctx, brand.key, batch(50, "a"))).status, 202);
    assert.equal((await post(ctx, brand.key, batch(50, "b"))).status, 202);
    assert.equal(await readBacklog(ctx.kv), 100);

    await assertQueueFull(await post(ctx, brand.key, batch(50, "c")));
    await assertQueueFull(await post(ctx, brand.key, batch(1, "d")));
    await assertQueueFull(await pixel(ctx, brand.scope!, batch(2, "anon_")));
    // Nothing of the refused requests was queued.
    assert.equal(await readBacklog(ctx.kv), 100);
    // Sync mode does not use the queue: it is not refused.
    const sync = await post(ctx, brand.key, batch(2, "s"), "?sync=true");
    assert.equal(sync.status, 200);
    await sync.body?.cancel();

    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    await eventually(async () => (await readBacklog(ctx.kv)) === 0);
    assert.equal(await eventCount(ctx), 102);
    // Within the edge's cache interval of the backlog figure it may still refuse; then it admits.
    let res = await post(ctx, brand.key, batch(50, "e"));
    await eventually(async () => {
      if (res.status === 202) return true;
      await assertQueueFull(res);
      res = await post(ctx, brand.key, batch(50, "e"));
      return false;
    });
    assert.equal((await pixel(ctx, brand.scope!, batch(2, "anon_"))).status, 202);
    await eventually(async () => (await eventCount(ctx)) === 154);
    // Every refused request accepted nothing: exactly the 202s' events are stored.
    const [row] = await ctx.sql`select count(*)::int as n from events where profile_id like 'c%'
      or profile_id like 'd%'`;
    assert.equal(row!.n, 0);
    ctx.kv.close();
    await forwarder;
  }, { INGEST_MAX_BACKLOG: "100" });
});

Deno.test("backpressure: a KV file filled to the bound, drained and filled again does not grow", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/queue.sqlite3`;
  const queueKv = await Deno.openKv(path);
  try {
    await withContext(
      async (ctx) => {
        const brand = await ctx.seedBrand();
        const fileSize = async () => {
          let bytes = 0;
          for (const suffix of ["", "-wal"]) {
            bytes += await Deno.stat(path + suffix).then((s) => s.size, () => 0);
          }
          return bytes;
        };
        // The forwarder's own handler, paused while a fill runs (KV hands it messages meanwhile;
        // they wait, still counted in the backlog).
        const handle = createQueueHandler({
          queue: ctx.queue,
          engine: ctx.deps.engine,
          now: ctx.clock.now,
        });
        let paused = Promise.withResolvers<void>();
        const listening = queueKv.listenQueue(async (message) => {
          await paused.promise;
          await handle(message);
        });
        const sizes: number[] = [];
        let request = 0;
        for (let cycle = 0; cycle < 3; cycle++) {
          // Fill until the queue refuses (bounded: on a service without the bound it never does).
          let res: Response;
          do {
            assert.ok(request++ < 1_000, "the queue never filled");
            res = await post(ctx, brand.key, batch(50, `c${cycle}r${request}_`));
            if (res.status === 202) await res.body?.cancel();
          } while (res.status === 202);
          await assertQueueFull(res);
          sizes.push(await fileSize());
          paused.resolve();
          await eventually(async () => (await readBacklog(queueKv)) === 0, 60_000);
          paused = Promise.withResolvers<void>();
          ctx.clock.advance(60_000); // a fresh API rate-limit window for the next fill
        }
        // Freed pages are reused: the second and third fills take no more room than the first
        // (a little slack for SQLite's page bookkeeping): the file stops at the bound's size.
        assert.ok(sizes[1]! <= sizes[0]! * 1.1 + 65_536, `sizes ${sizes.join(", ")}`);
        assert.ok(sizes[2]! <= sizes[0]! * 1.1 + 65_536, `sizes ${sizes.join(", ")}`);
        assert.ok((await eventCount(ctx)) >= 3 * 10_000);
        paused.resolve();
        queueKv.close();
        await listening;
      },
      { INGEST_MAX_BACKLOG: "10000" },
      { queueKv },
    );
  } finally {
    try {
      queueKv.close();
    } catch { /* closed above to end its listener */ }
    await Deno.remove(dir, { recursive: true });
  }
});
