import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import type { EventBatch, IngestEvent } from "../../../lib/engine/engine.ts";
import { createQueueHandler, startForwarder } from "../../../lib/ingest/forwarder.ts";
import { createOutboxQueue } from "../../../lib/ingest/outbox.ts";
import { listDeadLetters, readBacklog } from "../../../lib/ingest/queue.ts";
import { ingestOutboxPrefix } from "../../../lib/store/kv_keys.ts";
import { eventually, freshDatabase, testClock } from "../../test_support.ts";
import { openKv } from "../../../lib/store/kv_store.ts";

const newId = monotonicFactory();

async function outboxEntries(kv: Deno.Kv): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix: ingestOutboxPrefix() })) n++;
  return n;
}

async function withRawKv(fn: (raw: Deno.Kv) => Promise<void>): Promise<void> {
  const raw = await Deno.openKv(":memory:");
  try {
    await fn(raw);
  } finally {
    raw.close();
  }
}

function batchOf(events: IngestEvent[]): EventBatch {
  return {
    scope: "acme.myshopify.com",
    source: "server",
    receivedAt: "2026-11-21T12:00:00Z",
    events,
  };
}

Deno.test("outbox: a message is an outbox entry in the same commit, and nothing reaches KV's queue", async () => {
  const raw = await Deno.openKv(":memory:");
  let queued = 0;
  const queueListener = raw.listenQueue(() => {
    queued++;
  });
  try {
    const outbox = createOutboxQueue(raw, { newId });
    const refused = await outbox.send({ n: 0 }, {
      with: (op) => op.check({ key: ["guard"], versionstamp: "0".repeat(20) }).set(["written"], 1),
    });
    assert.equal(refused, false);
    assert.equal(await outboxEntries(raw), 0, "a refused commit writes no entry");

    await outbox.send({ n: 1 }, { with: (op) => op.set(["written"], 1) });
    await outbox.send({ n: 2 });
    assert.equal(await outboxEntries(raw), 2);
    assert.equal((await raw.get(["written"])).value, 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(queued, 0);
  } finally {
    raw.close();
    await queueListener;
  }
});

Deno.test("outbox: consume delivers every entry once, oldest first, then deletes it", async () => {
  await withRawKv(async (raw) => {
    const outbox = createOutboxQueue(raw, { newId, concurrency: 1 });
    const seen: unknown[] = [];
    const listening = outbox.consume((message) => {
      seen.push(message);
    });
    for (let n = 0; n < 5; n++) await outbox.send({ n });
    await eventually(() => seen.length === 5);
    await outbox.drained();
    assert.deepEqual(seen, [0, 1, 2, 3, 4].map((n) => ({ n })));
    assert.equal(await outboxEntries(raw), 0);
    outbox.stop();
    await listening;
  });
});

Deno.test("outbox: a failing delivery is retried on its backoff, then written to keysIfUndelivered", async () => {
  await withRawKv(async (raw) => {
    const outbox = createOutboxQueue(raw, { newId, pollMs: 5 });
    let attempts = 0;
    const listening = outbox.consume(() => {
      attempts++;
      throw new Error("transient");
    });
    await outbox.send({ n: 1 }, {
      backoffSchedule: [10, 10],
      keysIfUndelivered: [["undelivered", "a"], ["undelivered", "b"]],
    });
    await eventually(async () => (await raw.get(["undelivered", "b"])).versionstamp !== null);
    assert.equal(attempts, 3, "one delivery and two retries");
    assert.deepEqual((await raw.get(["undelivered", "a"])).value, { n: 1 });
    assert.equal(await outboxEntries(raw), 0);
    outbox.stop();
    await listening;
  });
});

Deno.test("outbox: a delayed message waits for its delay", async () => {
  await withRawKv(async (raw) => {
    let clock = 1_000_000;
    const outbox = createOutboxQueue(raw, { newId, now: () => clock, pollMs: 5, maxIdleMs: 5 });
    const seen: unknown[] = [];
    const listening = outbox.consume((message) => {
      seen.push(message);
    });
    await outbox.send("later", { delay: 60_000 });
    await outbox.drained();
    assert.deepEqual(seen, []);
    clock += 60_000;
    await eventually(() => seen.length === 1);
    outbox.stop();
    await listening;
  });
});

Deno.test("outbox: a listener that stops mid-delivery leaves the entry to another after the lease", async () => {
  const path = `${await Deno.makeTempDir()}/kv.sqlite3`;
  // Opened as the service opens KV (busy retries): two handles on one file can find it locked.
  const first = createOutboxQueue(await openKv(path), { newId, leaseMs: 300, pollMs: 10 });
  const second = createOutboxQueue(await openKv(path), { newId, leaseMs: 300, pollMs: 10 });
  try {
    let started!: () => void;
    const delivering = new Promise<void>((resolve) => started = resolve);
    const stuck = first.consume(() => {
      started();
      return new Promise<void>(() => {}); // never finishes: the process "died" here
    });
    await first.send({ n: 1 });
    await delivering;
    first.stop();
    await stuck;
    const seen: unknown[] = [];
    const listening = second.consume((message) => {
      seen.push(message);
    });
    await eventually(() => seen.length === 1);
    assert.deepEqual(seen, [{ n: 1 }]);
    second.stop();
    await listening;
  } finally {
    first.kv.close();
    second.kv.close();
    await Deno.remove(path.slice(0, path.lastIndexOf("/")), { recursive: true });
  }
});

Deno.test("outbox: the forwarder applies batches through it, with the backlog and dead letters", async () => {
  const db = await freshDatabase();
  const raw = await Deno.openKv(":memory:");
  const clock = testClock();
  try {
    const outbox = createOutboxQueue(raw, { newId });
    const kv = outbox.kv;
    const engine = createEmbeddedEngine({ sql: db.sql, now: clock.now });
    const forwarding = startForwarder({ queue: outbox, engine, now: clock.now });
    const good: IngestEvent = { id: newId(), eventType: "page_viewed", profileId: "p1" };
    const bad: IngestEvent = { id: newId(), eventType: "not_registered", profileId: "p1" };
    await outbox.accept({ brandId: "brand_1", batch: batchOf([good, bad]) });
    assert.equal(await readBacklog(kv), 2);
    await eventually(async () => (await readBacklog(kv)) === 0);
    const [row] = await db.sql`select count(*)::int as n from events`;
    assert.equal(row!.n, 1);
    const letters = await listDeadLetters(kv);
    assert.deepEqual(letters.map((l) => l.message.batch.events), [[bad]]);
    // A redelivery (at-least-once) applies nothing twice.
    await createQueueHandler({ queue: outbox, engine, now: clock.now })({
      kind: "events",
      id: newId(),
      brandId: "brand_1",
      batch: batchOf([good]),
    });
    const [again] = await db.sql`select count(*)::int as n from events`;
    assert.equal(again!.n, 1);
    outbox.stop();
    await forwarding;
  } finally {
    raw.close();
    await db.close();
  }
});
