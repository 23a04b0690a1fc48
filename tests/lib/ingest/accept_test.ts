import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { EVENT_REGISTRY_VERSION } from "../../../lib/engine/event_types.ts";
import { DomainError } from "../../../lib/errors.ts";
import { acceptEvents } from "../../../lib/ingest/accept.ts";
import type { AcceptedEvent } from "../../../lib/ingest/edge.ts";
import { createOutboxQueue } from "../../../lib/ingest/outbox.ts";
import { createKvQueue, type EventsMessage, readBacklog } from "../../../lib/ingest/queue.ts";
import { ingestOutboxPrefix } from "../../../lib/store/kv_keys.ts";
import { eventually, recordQueue, testClock, withKv } from "../../test_support.ts";

const newId = monotonicFactory();
const brand = { brandId: "brand_1", scope: "acme.myshopify.com" };

function accepted(count: number): AcceptedEvent[] {
  return Array.from({ length: count }, (_, index) => ({
    index,
    event: { id: newId(), eventType: "page_viewed", profileId: `p${index}` },
    storedBytes: 200,
  }));
}

Deno.test("acceptEvents: queues the events as one batch of the brand's scope and source, stamped as checked", async () => {
  const kv = await Deno.openKv(":memory:");
  {
    const clock = testClock();
    const queue = createKvQueue(kv, { newId });
    const recorded = recordQueue(kv);
    const events = accepted(3);
    const { folded } = await acceptEvents({ kv, queue, now: clock.now }, brand, "pixel", events);
    assert.equal(folded, false);
    await eventually(() => recorded.seen.length === 1);
    const message: EventsMessage = recorded.seen[0]!;
    assert.equal(message.brandId, brand.brandId);
    assert.deepEqual(message.batch, {
      scope: brand.scope,
      source: "pixel",
      receivedAt: clock.now().toISOString(),
      events: events.map((a) => a.event),
      checked: EVENT_REGISTRY_VERSION,
    });
    kv.close();
    await recorded.listening;
  }
});

Deno.test("acceptEvents: the request's own writes join the queue's commit only when the queue is in the app's KV", async () => {
  await withKv(async (kv) => {
    const deps = { kv, queue: createKvQueue(kv, { newId }), now: testClock().now };
    const also = (op: Deno.AtomicOperation) => void op.set(["usage", "r1"], 1);
    assert.deepEqual(await acceptEvents(deps, brand, "server", accepted(2), { also }), {
      folded: true,
    });
    assert.equal((await kv.get(["usage", "r1"])).value, 1);
    // Nothing to queue: nothing is committed, the caller writes its own.
    assert.deepEqual(await acceptEvents(deps, brand, "server", [], { also }), { folded: false });

    const elsewhere = await Deno.openKv(":memory:");
    try {
      const apart = { ...deps, queue: createKvQueue(elsewhere, { newId }) };
      const other = (op: Deno.AtomicOperation) => void op.set(["usage", "r2"], 1);
      const { folded } = await acceptEvents(apart, brand, "server", accepted(2), { also: other });
      assert.equal(folded, false);
      assert.equal((await kv.get(["usage", "r2"])).versionstamp, null);
      assert.equal((await elsewhere.get(["usage", "r2"])).versionstamp, null);
      assert.equal(await readBacklog(elsewhere), 2);
    } finally {
      elsewhere.close();
    }
  });
});

Deno.test("acceptEvents: past the backlog bound nothing is accepted (queue_full), on either queue", async () => {
  for (const make of [createKvQueue, createOutboxQueue]) {
    await withKv(async (kv) => {
      const queue = make(kv, { newId, maxBacklog: 4 });
      const deps = { kv, queue, now: testClock().now };
      await acceptEvents(deps, brand, "server", accepted(4));
      await assert.rejects(
        acceptEvents(deps, brand, "server", accepted(1)),
        (err: unknown) =>
          err instanceof DomainError && err.kind === "queue_full" &&
          err.retryAfterSeconds === 5,
      );
      assert.equal(await queue.backlog(), 4);
      queue.stop();
    });
  }
});

Deno.test("acceptEvents: on the outbox the batch is outbox entries, not KV queue messages", async () => {
  await withKv(async (kv) => {
    const queue = createOutboxQueue(kv, { newId });
    await acceptEvents({ kv, queue, now: testClock().now }, brand, "server", accepted(2));
    let entries = 0;
    for await (const _ of kv.list({ prefix: ingestOutboxPrefix() })) entries++;
    assert.equal(entries, 1);
    assert.equal(await queue.backlog(), 2);
  });
});
