import { serialize } from "node:v8";
import assert from "node:assert/strict";
import type { Sql } from "../../../lib/store/db.ts";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import { type EventBatch, type IngestEvent } from "../../../lib/engine/engine.ts";
import {
  BacklogGate,
  chunkEvents,
  type EventsMessage,
  getDeadLetter,
  isEventsMessage,
  listDeadLetters,
  readBacklog,
  replayDeadLetter,
  retireBacklogMessage,
  retireBacklogMessages,
  retireUndelivered,
  storedSizeBound,
  storedSizeBoundWith,
  writeDeadLetter,
} from "../../../lib/ingest/queue.ts";
import { deadLetterKey } from "../../../lib/store/kv_keys.ts";
import { DomainError } from "../../../lib/errors.ts";
import { enqueueBatch, freshDatabase, kvQueue, testClock } from "../../test_support.ts";

const SCOPE = "acme.myshopify.com";
const QUEUE_LIMIT = 64 * 1024;

let _seq = 0;
/** Ids that sort in creation order (KV lists dead letters by key). */
function seqId(prefix = "id"): string {
  return `${prefix}-${String(++_seq).padStart(6, "0")}`;
}

function event(fields: Partial<IngestEvent> = {}): IngestEvent {
  return { id: seqId("evt"), eventType: "page_viewed", profileId: "p1", ...fields };
}

/** An event padded with `char` so that its JSON is about `units` UTF-16 code units long. */
function bigEvent(units: number, char = "x"): IngestEvent {
  return event({ properties: { pad: char.repeat(Math.floor(units / char.length)) } });
}

function batchOf(events: IngestEvent[]): EventBatch {
  return { scope: SCOPE, source: "server", receivedAt: "2026-11-21T12:00:00.000Z", events };
}

function messageOf(events: IngestEvent[], brandId = "brand_1"): EventsMessage {
  return { kind: "events", id: seqId("msg"), brandId, batch: batchOf(events) };
}

/** Polls until `check` holds (bounded: the queue delivers asynchronously). */
async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function withKv(fn: (kv: Deno.Kv) => Promise<void>): Promise<void> {
  const kv = await Deno.openKv(":memory:");
  try {
    await fn(kv);
  } finally {
    try {
      kv.close();
    } catch { /* the test closed it to stop its listener */ }
  }
}

/**
 * Listens on the queue and collects every message. `stop()` closes KV (which ends the listener)
 * and waits for the listener to finish.
 */
function collect(kv: Deno.Kv) {
  const received: unknown[] = [];
  const listening = kv.listenQueue((message) => {
    received.push(message);
  });
  return {
    received,
    async stop() {
      kv.close();
      await listening;
    },
  };
}

function utf16Units(value: unknown): number {
  return JSON.stringify(value).length;
}

function utf8Bytes(value: unknown): number {
  return new TextEncoder().encode(JSON.stringify(value)).length;
}

// --- chunkEvents ---

Deno.test("chunkEvents: one small batch is one chunk", () => {
  const events = [event(), event({ profileId: "p2" }), event({ sessionId: "s1" })];
  assert.deepEqual(chunkEvents(events), [events]);
});

Deno.test("chunkEvents: no events, no chunks", () => {
  assert.deepEqual(chunkEvents([]), []);
});

Deno.test("chunkEvents: 50 events of ~20 KB become several chunks, each under 64 KiB, in order", () => {
  const events = Array.from({ length: 50 }, () => bigEvent(20_000));
  const chunks = chunkEvents(events);
  assert.ok(chunks.length > 1, `${chunks.length} chunks`);
  for (const chunk of chunks) {
    assert.ok(chunk.length > 0);
    assert.ok(utf8Bytes(chunk) < QUEUE_LIMIT, `${utf8Bytes(chunk)} bytes`);
  }
  assert.deepEqual(chunks.flat(), events);
  // Nothing lost or duplicated.
  assert.equal(new Set(chunks.flat().map((e) => e.id)).size, 50);
});

Deno.test("chunkEvents: with non-Latin-1 characters, chunks stay under 64 KiB at 2 bytes per UTF-16 unit", () => {
  for (const char of ["漢", "😀", "é漢"]) {
    // ~20 KB of UTF-8 each (CJK is 3 bytes a character, emoji 4).
    const events = Array.from({ length: 50 }, () => bigEvent(7_000, char));
    const chunks = chunkEvents(events);
    assert.ok(chunks.length > 1, char);
    for (const chunk of chunks) {
      assert.ok(utf16Units(chunk) * 2 < QUEUE_LIMIT, `${char}: ${utf16Units(chunk) * 2} bytes`);
      assert.ok(utf8Bytes(chunk) < QUEUE_LIMIT * 2, char);
    }
    assert.deepEqual(chunks.flat(), events, char);
  }
});

Deno.test("chunkEvents: Latin-1 text counts one byte a character, so it packs more per chunk", () => {
  const latin = Array.from({ length: 10 }, () => bigEvent(15_000, "é"));
  const cjk = Array.from({ length: 10 }, () => bigEvent(15_000, "漢"));
  const latinChunks = chunkEvents(latin);
  const cjkChunks = chunkEvents(cjk);
  assert.ok(latinChunks.length < cjkChunks.length, `${latinChunks.length} vs ${cjkChunks.length}`);
  for (const chunk of latinChunks) assert.ok(utf16Units(chunk) < QUEUE_LIMIT);
  for (const chunk of cjkChunks) assert.ok(utf16Units(chunk) * 2 < QUEUE_LIMIT);
});

Deno.test("chunkEvents: an event bigger than the budget gets a chunk of its own", () => {
  const small1 = event();
  const huge = bigEvent(100_000);
  const small2 = event();
  const small3 = event();
  assert.deepEqual(chunkEvents([small1, huge, small2, small3]), [[small1], [huge], [
    small2,
    small3,
  ]]);
  assert.deepEqual(chunkEvents([huge]), [[huge]]);
  assert.deepEqual(chunkEvents([huge, huge]), [[huge], [huge]]);
});

// --- enqueueBatch ---

Deno.test("enqueueBatch: the listener receives 'events' messages split as chunkEvents splits the batch", async () => {
  await withKv(async (kv) => {
    const queue = collect(kv);
    const events = Array.from({ length: 6 }, () => bigEvent(20_000));
    const expectedChunks = chunkEvents(events);
    assert.ok(expectedChunks.length > 1);
    let n = 0;
    const batch = batchOf(events);
    await enqueueBatch(kv, { brandId: "brand_1", batch, newId: () => `msg-${++n}` });
    assert.equal(n, expectedChunks.length, "one id per message");

    await eventually(() => queue.received.length >= expectedChunks.length);
    await queue.stop();
    assert.equal(queue.received.length, expectedChunks.length);
    const messages = queue.received as EventsMessage[];
    assert.ok(messages.every(isEventsMessage));
    // Delivery order across messages is not promised: match messages to chunks by id.
    messages.sort((a, b) => Number(a.id.slice(4)) - Number(b.id.slice(4)));
    assert.deepEqual(
      messages,
      expectedChunks.map((chunk, i) => ({
        kind: "events",
        id: `msg-${i + 1}`,
        brandId: "brand_1",
        batch: { ...batch, events: chunk },
      })),
    );
  });
});

// The crashed process: it queues a message, takes it, says so and never finishes it.
const HOLDER = `
  const kv = await Deno.openKv(Deno.env.get("KV_FILE"));
  kv.listenQueue(() => {
    console.log("held");
    return new Promise(() => {});
  });
  await kv.enqueue({ kind: "held" }, { backoffSchedule: [100] });
`;

Deno.test("Deno KV queue: a message held by a process killed with SIGKILL is delivered seconds after a restart", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/kv.sqlite3`;
  const holder = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--unstable-kv", HOLDER],
    env: { KV_FILE: path },
    stdout: "piped",
  }).spawn();
  const lines = holder.stdout.pipeThrough(new TextDecoderStream()).getReader();
  for (let out = ""; !out.includes("held");) out += (await lines.read()).value ?? "";
  holder.kill("SIGKILL");
  await holder.status;
  await lines.cancel();

  // Restarted at once, while the dead process's hold on the message has not lapsed yet.
  const kv = await Deno.openKv(path);
  const received: unknown[] = [];
  const consuming = kvQueue(kv, { reopen: () => Deno.openKv(path) })
    .consume((message) => void received.push(message));
  try {
    // Well before Deno KV's own cleanup, which runs about a minute after the store opens.
    await eventually(() => received.length > 0, 30_000);
    assert.deepEqual(received, [{ kind: "held" }]);
  } finally {
    kv.close();
    await consuming;
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("accept: concurrent batches share messages; each event once, each request's writes kept", async () => {
  await withKv(async (kv) => {
    const queue = collect(kv);
    const shared = kvQueue(kv, { newId: seqId });
    const other = { ...batchOf([event(), event()]), source: "pixel" as const };
    const batches = [
      ...Array.from({ length: 10 }, (_, i) => ({
        ...batchOf([event(), event(), event()]),
        receivedAt: `2026-11-21T12:00:0${i}.000Z`,
      })),
      other,
    ];
    await Promise.all(batches.map((batch, i) =>
      shared.accept({
        brandId: "brand_1",
        batch,
        also: (op) => op.set(["also", i], true),
      })
    ));
    assert.equal(await readBacklog(kv), 32);
    await eventually(() =>
      (queue.received as EventsMessage[]).reduce((n, m) => n + m.batch.events.length, 0) === 32
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const messages = queue.received as EventsMessage[];
    // The first request commits alone at once; the ten that waited share one message per source.
    assert.ok(messages.length < batches.length, `${messages.length} messages`);
    const ids = messages.flatMap((m) => m.batch.events.map((e) => e.id)).sort();
    assert.deepEqual(ids, batches.flatMap((b) => b.events.map((e) => e.id)).sort());
    for (const m of messages) {
      const pixel = new Set(other.events.map((e) => e.id));
      const source = m.batch.events.every((e) => pixel.has(e.id)) ? "pixel" : "server";
      assert.equal(m.batch.source, source);
      const own = batches.filter((b) =>
        b.events.some((e) => m.batch.events.some((x) => x.id === e.id))
      );
      // A packed message carries the earliest receivedAt of its batches.
      assert.equal(m.batch.receivedAt, own.map((b) => b.receivedAt).sort()[0]);
    }
    for (let i = 0; i < batches.length; i++) {
      assert.equal((await kv.get(["also", i])).value, true);
    }
    await queue.stop();
  });
});

Deno.test("enqueueBatch: 50 large events go as many messages in one commit, each event exactly once", async () => {
  await withKv(async (kv) => {
    const queue = collect(kv);
    // ~14 KB each: 50 of them stay under KV's 800 KiB limit for one atomic commit.
    const events = Array.from({ length: 50 }, () => bigEvent(14_000));
    const batch = batchOf(events);
    const messageIds: string[] = [];
    await enqueueBatch(kv, {
      brandId: "brand_1",
      batch,
      newId: () => {
        messageIds.push(seqId("msg"));
        return messageIds.at(-1)!;
      },
    });
    assert.ok(messageIds.length > 1, `${messageIds.length} messages`);

    const eventIds = () => queue.received.filter(isEventsMessage).flatMap((m) => m.batch.events);
    await eventually(() => eventIds().length >= 50);
    // A last message: once it is in, anything delivered twice would have arrived before it.
    await kv.enqueue({ sentinel: true });
    await eventually(() => queue.received.some((m) => (m as { sentinel?: boolean }).sentinel));
    await queue.stop();

    const messages = queue.received.filter(isEventsMessage);
    assert.equal(messages.length, messageIds.length);
    assert.deepEqual(messages.map((m) => m.id).sort(), [...messageIds].sort());
    const delivered = eventIds().map((e) => e.id);
    assert.equal(delivered.length, 50);
    assert.deepEqual([...delivered].sort(), events.map((e) => e.id).sort());
    // Each message keeps its events in the batch's order.
    for (const m of messages) {
      const positions = m.batch.events.map((e) => events.findIndex((x) => x.id === e.id));
      assert.deepEqual(positions, [...positions].sort((a, b) => a - b));
      assert.equal(m.brandId, "brand_1");
      assert.equal(m.batch.scope, SCOPE);
    }
  });
});

Deno.test("enqueueBatch: events of multi-byte characters near the event limit fit the queue", async () => {
  await withKv(async (kv) => {
    const queue = collect(kv);
    // ~30 KB of UTF-8 each: CJK (3 bytes, 1 unit), emoji (4 bytes, 2 units) and Latin-1 (2
    // bytes, 1 unit, stored one byte a character: three of these share a ~48 KB message).
    const events = [
      ...Array.from({ length: 6 }, () => bigEvent(10_000, "漢")),
      ...Array.from({ length: 6 }, () => bigEvent(15_000, "😀")),
      ...Array.from({ length: 6 }, () => bigEvent(16_000, "é")),
    ];
    await enqueueBatch(kv, { brandId: "brand_1", batch: batchOf(events), newId: seqId });
    const delivered = () => (queue.received as EventsMessage[]).flatMap((m) => m.batch.events);
    await eventually(() => delivered().length >= events.length);
    await queue.stop();
    assert.deepEqual(delivered().map((e) => e.id).sort(), events.map((e) => e.id).sort());
    assert.deepEqual(
      delivered().find((e) => e.id === events[0]!.id)?.properties,
      events[0]!.properties,
    );
  });
});

Deno.test("enqueueBatch: a batch over KV's commit limit is refused whole, nothing is queued", async () => {
  await withKv(async (kv) => {
    const queue = collect(kv);
    // 50 × 30 KB exceeds the 800 KiB total of one atomic commit (unreachable over HTTP, whose
    // body limit is 256 KB): the commit fails and no message of the batch is enqueued.
    const events = Array.from({ length: 50 }, () => bigEvent(30_000));
    await assert.rejects(
      enqueueBatch(kv, { brandId: "brand_1", batch: batchOf(events), newId: seqId }),
      (err: unknown) =>
        err instanceof DomainError && err.kind === "service_unavailable" &&
        err.cause instanceof TypeError,
    );
    await kv.enqueue({ sentinel: true });
    await eventually(() => queue.received.length >= 1);
    await queue.stop();
    assert.deepEqual(queue.received, [{ sentinel: true }]);
  });
});

// --- isEventsMessage ---

Deno.test("isEventsMessage: accepts the service's messages and rejects malformed values", () => {
  const good = messageOf([event()]);
  assert.equal(isEventsMessage(good), true);
  assert.equal(isEventsMessage({ ...good, batch: { ...good.batch, events: [] } }), true);
  const bad: unknown[] = [
    null,
    undefined,
    "events",
    42,
    [],
    [good],
    {},
    { ...good, kind: "other" },
    { ...good, kind: undefined },
    { ...good, id: 1 },
    { ...good, id: undefined },
    { ...good, brandId: null },
    { ...good, brandId: undefined },
    { ...good, batch: null },
    { ...good, batch: "batch" },
    { ...good, batch: {} },
    { ...good, batch: { ...good.batch, events: "x" } },
    { ...good, batch: { ...good.batch, events: { 0: event() } } },
    { deadLetter: true, message: good, reason: "r", failedAt: null },
  ];
  for (const value of bad) assert.equal(isEventsMessage(value), false, JSON.stringify(value));
});

// --- dead letters ---

Deno.test("dead letters: both the bare message (KV's own) and the wrapper form are read", async () => {
  await withKv(async (kv) => {
    const bare = messageOf([event()]);
    const wrapped = messageOf([event(), event()]);
    // What keysIfUndelivered writes when retries run out: the message itself.
    await kv.set(deadLetterKey(bare.id), bare);
    await writeDeadLetter(
      kv,
      wrapped,
      "400 no registered schema",
      new Date("2026-11-21T12:00:00Z"),
    );

    const expectedBare = {
      id: bare.id,
      message: bare,
      reason: "delivery retries exhausted",
      failedAt: null,
    };
    const expectedWrapped = {
      id: wrapped.id,
      message: wrapped,
      reason: "400 no registered schema",
      failedAt: "2026-11-21T12:00:00.000Z",
    };
    assert.deepEqual(await listDeadLetters(kv), [expectedBare, expectedWrapped]);

    const foundBare = await getDeadLetter(kv, bare.id);
    assert.deepEqual(foundBare?.letter, expectedBare);
    assert.deepEqual(foundBare?.entry.key, deadLetterKey(bare.id));
    assert.ok(foundBare?.entry.versionstamp);
    assert.deepEqual((await getDeadLetter(kv, wrapped.id))?.letter, expectedWrapped);
    assert.equal(await getDeadLetter(kv, "missing"), null);
  });
});

Deno.test("dead letters: values that are neither form are skipped", async () => {
  await withKv(async (kv) => {
    const good = messageOf([event()]);
    await kv.set(deadLetterKey("a-junk"), { foo: 1 });
    await kv.set(deadLetterKey("b-junk"), "text");
    await kv.set(deadLetterKey("c-junk"), { deadLetter: true, message: { kind: "events" } });
    await kv.set(deadLetterKey("d-junk"), { deadLetter: false, message: good });
    await kv.set(deadLetterKey(good.id), good);
    assert.deepEqual((await listDeadLetters(kv)).map((l) => l.id), [good.id]);
    for (const id of ["a-junk", "b-junk", "c-junk", "d-junk"]) {
      assert.equal(await getDeadLetter(kv, id), null, id);
    }
  });
});

Deno.test("dead letters: listDeadLetters filters by brand", async () => {
  await withKv(async (kv) => {
    const a1 = messageOf([event()], "brand_a");
    const b1 = messageOf([event()], "brand_b");
    const a2 = messageOf([event()], "brand_a");
    await kv.set(deadLetterKey(a1.id), a1);
    await writeDeadLetter(kv, b1, "r", new Date(0));
    await writeDeadLetter(kv, a2, "r", new Date(0));
    assert.deepEqual((await listDeadLetters(kv, "brand_a")).map((l) => l.id), [a1.id, a2.id]);
    assert.deepEqual((await listDeadLetters(kv, "brand_b")).map((l) => l.id), [b1.id]);
    assert.deepEqual(await listDeadLetters(kv, "brand_c"), []);
    assert.deepEqual((await listDeadLetters(kv)).map((l) => l.id), [a1.id, b1.id, a2.id]);
  });
});

// --- replayDeadLetter ---

async function withStores(
  fn: (deps: Parameters<typeof replayDeadLetter>[0], sql: Sql) => Promise<void>,
): Promise<void> {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  const clock = testClock();
  try {
    await fn(
      { kv, engine: createEmbeddedEngine({ sql: db.sql, now: clock.now }), now: clock.now },
      db.sql,
    );
  } finally {
    kv.close();
    await db.close();
  }
}

async function storedEventIds(sql: Sql): Promise<string[]> {
  const rows = await sql`select id from events where scope = ${SCOPE} order by id`;
  return rows.map((r) => r.id as string);
}

Deno.test("replayDeadLetter: applies a bare-message letter and deletes it", async () => {
  await withStores(async (deps, sql) => {
    const events = [event({ profileId: "p1" }), event({ profileId: "p2", sessionId: "s1" })];
    const message = messageOf(events);
    await deps.kv.set(deadLetterKey(message.id), message);

    const outcome = await replayDeadLetter(deps, message.id);
    assert.deepEqual(outcome, { id: message.id, applied: 2, failed: [] });
    assert.deepEqual(await storedEventIds(sql), events.map((e) => e.id).sort());
    assert.equal(await getDeadLetter(deps.kv, message.id), null);
    assert.equal((await deps.kv.get(deadLetterKey(message.id))).versionstamp, null);
    assert.deepEqual(await listDeadLetters(deps.kv), []);
  });
});

Deno.test("replayDeadLetter: applies a wrapper letter and deletes it; other letters stay", async () => {
  await withStores(async (deps, sql) => {
    const message = messageOf([event()]);
    const other = messageOf([event()]);
    await writeDeadLetter(deps.kv, message, "retries exhausted", new Date(0));
    await writeDeadLetter(deps.kv, other, "retries exhausted", new Date(0));
    const outcome = await replayDeadLetter(deps, message.id);
    assert.deepEqual(outcome, { id: message.id, applied: 1, failed: [] });
    assert.deepEqual(await storedEventIds(sql), [message.batch.events[0]!.id]);
    assert.deepEqual((await listDeadLetters(deps.kv)).map((l) => l.id), [other.id]);
  });
});

Deno.test("replayDeadLetter: a still-failing event keeps the letter, with only it and the new reason; valid events apply", async () => {
  await withStores(async (deps, sql) => {
    const good = event({ profileId: "p1" });
    const bad = event({ eventType: "not_registered", profileId: "p2" });
    const message = messageOf([good, bad]);
    await deps.kv.set(deadLetterKey(message.id), message);

    const outcome = await replayDeadLetter(deps, message.id);
    assert.ok(outcome);
    assert.equal(outcome.id, message.id);
    assert.equal(outcome.applied, 1);
    assert.equal(outcome.failed.length, 1);
    assert.equal(outcome.failed[0]!.eventId, bad.id);
    assert.equal(outcome.failed[0]!.status, 400);
    assert.match(outcome.failed[0]!.error, /no registered schema/);
    assert.deepEqual(await storedEventIds(sql), [good.id]);

    const kept = await getDeadLetter(deps.kv, message.id);
    assert.ok(kept);
    assert.deepEqual(kept.letter.message, {
      ...message,
      batch: { ...message.batch, events: [bad] },
    });
    assert.equal(kept.letter.reason, `${bad.id}: 400 ${outcome.failed[0]!.error}`);
    assert.equal(kept.letter.failedAt, deps.now().toISOString());

    // Replaying again applies nothing twice and still keeps the letter.
    const again = await replayDeadLetter(deps, message.id);
    assert.equal(again?.failed.length, 1);
    assert.deepEqual(await storedEventIds(sql), [good.id]);
    assert.ok(await getDeadLetter(deps.kv, message.id));
  });
});

Deno.test("replayDeadLetter: given events replace the letter's; each keeps a letter event's id", async () => {
  await withStores(async (deps, sql) => {
    const poison = event({ profileId: "p1", properties: { v: "a\u0000" } });
    const hopeless = event({ profileId: "p2", timeStamp: "0000-01-01T00:00:00Z" });
    const message = messageOf([poison, hopeless]);
    await writeDeadLetter(deps.kv, message, "r", new Date(0));

    // A new id, or one given twice, is refused before anything applies.
    const stranger = event({ profileId: "p3" });
    await assert.rejects(
      replayDeadLetter(deps, message.id, { events: [stranger] }),
      new RegExp(`event ${stranger.id} is not in dead letter ${message.id}`),
    );
    const fixed = { ...poison, properties: { v: "a" } };
    await assert.rejects(
      replayDeadLetter(deps, message.id, { events: [fixed, fixed] }),
      /given twice/,
    );
    assert.deepEqual(await storedEventIds(sql), []);

    // A fix that still fails keeps the letter, now holding the fix.
    const stillBad = { ...poison, properties: { v: "b\u0000" } };
    const first = await replayDeadLetter(deps, message.id, { events: [stillBad, hopeless] });
    assert.equal(first?.applied, 0);
    assert.deepEqual(first?.failed.map((f) => f.eventId), [poison.id, hopeless.id]);
    assert.deepEqual(
      (await getDeadLetter(deps.kv, message.id))?.letter.message.batch.events,
      [stillBad, hopeless],
    );

    // The fixed event applies; the hopeless one, left out, is dropped with the letter.
    const outcome = await replayDeadLetter(deps, message.id, { events: [fixed] });
    assert.deepEqual(outcome, { id: message.id, applied: 1, failed: [] });
    assert.deepEqual(await storedEventIds(sql), [poison.id]);
    assert.equal(await getDeadLetter(deps.kv, message.id), null);
  });
});

Deno.test("replayDeadLetter: an unknown id returns null and touches nothing", async () => {
  await withStores(async (deps, sql) => {
    const message = messageOf([event()]);
    await deps.kv.set(deadLetterKey(message.id), message);
    assert.equal(await replayDeadLetter(deps, "no-such-letter"), null);
    assert.deepEqual(await storedEventIds(sql), []);
    assert.equal((await listDeadLetters(deps.kv)).length, 1);
  });
});

Deno.test("chunkEvents: sizes are measured as KV stores them, so number-heavy events still fit", async () => {
  // Each event's JSON is small ("0.5," is 4 bytes) but each double is stored in 9.
  const events: IngestEvent[] = Array.from({ length: 5 }, (_, i) => ({
    id: `e${i}`,
    eventType: "page_viewed",
    profileId: `p${i}`,
    properties: { v: Array(2000).fill(0.5) },
  }));
  const chunks = chunkEvents(events);
  assert.ok(chunks.length > 1);
  for (const chunk of chunks) assert.ok(serialize({ events: chunk }).byteLength < 65_536);
  const kv = await Deno.openKv(":memory:");
  try {
    await enqueueBatch(kv, {
      brandId: "b",
      batch: {
        scope: "s.myshopify.com",
        source: "server",
        receivedAt: "2026-11-21T00:00:00Z",
        events,
      },
      newId: (() => {
        let n = 0;
        return () => `m${n++}`;
      })(),
    });
  } finally {
    kv.close();
  }
});

Deno.test("storedSizeBound: never below what Deno KV stores, for any mix of values", () => {
  let seed = 7;
  const random = (k: number) => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed % k;
  };
  const value = (depth: number): unknown => {
    switch (random(depth > 3 ? 6 : 9)) {
      case 0:
        return random(2) ? random(1e6) : (random(1e9) - 5e8) / 7;
      case 1:
        return "x".repeat(random(20_000));
      case 2:
        return "é😀漢".repeat(random(2_000));
      case 3:
        return random(2) === 1;
      case 4:
        return null;
      case 5:
        return Array.from({ length: random(2_000) }, (_, i) => i / 3);
      case 6:
        return Array.from({ length: random(20) }, () => value(depth + 1));
      default:
        return Object.fromEntries(
          Array.from(
            { length: random(20) },
            (_, i) => [`k${i}${"é".repeat(random(2))}`, value(depth + 1)],
          ),
        );
    }
  };
  for (let i = 0; i < 1_500; i++) {
    const event = {
      id: "e",
      eventType: "page_viewed",
      profileId: "p",
      properties: { v: value(0) },
    };
    assert.ok(
      storedSizeBound(event) >= serialize(event).byteLength,
      JSON.stringify(event).slice(0, 80),
    );
  }
});

Deno.test("storedSizeBoundWith: adding a member never undercuts the bound measured whole", () => {
  const events = [
    { eventType: "page_viewed", profileId: "p", properties: { n: 1, s: "x" } },
    { eventType: "page_viewed", profileId: "p", properties: { s: "é😀漢".repeat(50) } },
    { eventType: "order_created", profileId: "p", properties: { items: [1, 2, 3], a: [[{}]] } },
  ];
  const ids = ["01JD7Z0B56V64DY27QEQ7VHWH7", "1234567890", "id-é😀", "x", ""];
  for (const event of events) {
    const json = JSON.stringify(event);
    for (const id of ids) {
      const withId = storedSizeBoundWith(
        storedSizeBound(event, json),
        json.length,
        `"id":${JSON.stringify(id)},`,
      );
      const whole = { id, ...event };
      assert.ok(withId >= storedSizeBound(whole), `${id}: ${withId} < ${storedSizeBound(whole)}`);
      assert.ok(withId >= serialize(whole).byteLength);
    }
  }
});

/** The per-character scan storedSizeBound used for any text before its native one. */
function referenceBound(json: string): number {
  let wide = false;
  let numbers = 0;
  let containers = 0;
  let inDigits = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c < 0x20 || c > 0xff) wide = true;
    const digit = c >= 0x30 && c <= 0x39;
    if (digit && !inDigits) numbers++;
    inDigits = digit;
    if (c === 0x7b || c === 0x5b) containers++;
  }
  return (wide ? 2 : 1) * json.length + 9 * numbers + 8 * containers + 64;
}

Deno.test("storedSizeBound: the same figure as a per-character scan, short text or long", () => {
  const texts = [
    "",
    "0",
    "a",
    "{}",
    "[[[]]]",
    "12a34b5",
    "x9",
    "9x",
    "1e+21",
    "-0.5",
    "\u0000\u001f",
    "\u00ff\u0100",
    "é😀漢",
    "\ud800",
    '{"a":[1,2,{"b":"c3"}],"d":"\\u0001"}',
  ];
  let seed = 11;
  const random = (k: number) => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    // The high bits: an LCG's low bits repeat with a short period.
    return Math.floor((seed / 2_147_483_648) * k);
  };
  const alphabet = [
    "{",
    "[",
    "}",
    "]",
    '"',
    ":",
    ",",
    "0",
    "7",
    "9",
    "a",
    "é",
    "\u00ff",
    "\u0100",
    "😀",
    "\n",
    " ",
    "-",
    ".",
  ];
  // Most texts of the full alphabet have a wide character; a Latin-1 one (up to \u00ff, the
  // last narrow character) tests the other answer. Lengths fall on both sides of 64.
  const latin1 = alphabet.filter((c) => c >= " " && c <= "\u00ff");
  for (let i = 0; i < 3_000; i++) {
    const chars = i % 2 ? alphabet : latin1;
    texts.push(Array.from({ length: random(200) }, () => chars[random(chars.length)]).join(""));
  }
  for (const char of ["\u001f", "\u00ff", "\u0100", "\ud800", "9", "{"]) {
    texts.push("x".repeat(100) + char, char + "x".repeat(100), char.repeat(100));
  }
  for (const text of texts) {
    assert.equal(storedSizeBound(null, text), referenceBound(text), JSON.stringify(text));
  }
  // And twice in a row (the scan keeps a global regular expression's position between calls).
  assert.equal(storedSizeBound(null, "1 2 3"), referenceBound("1 2 3"));
  assert.equal(storedSizeBound(null, "1 2 3"), referenceBound("1 2 3"));
});

// --- the backlog ---

Deno.test("backlog: an enqueue counts its events in its own commit; a refused one counts none", async () => {
  await withKv(async (kv) => {
    assert.equal(await readBacklog(kv), 0);
    await enqueueBatch(kv, { brandId: "b", batch: batchOf([event(), event()]), newId: seqId });
    // Several messages (large events) are one count of all their events.
    const large = Array.from({ length: 5 }, () => bigEvent(20_000));
    await enqueueBatch(kv, { brandId: "b", batch: batchOf(large), newId: seqId });
    assert.equal(await readBacklog(kv), 7);
    const tooBig = Array.from({ length: 50 }, () => bigEvent(30_000));
    await assert.rejects(enqueueBatch(kv, { brandId: "b", batch: batchOf(tooBig), newId: seqId }));
    assert.equal(await readBacklog(kv), 7);
  });
});

Deno.test("backlog: a finished message is counted out once, however often it is retired", async () => {
  await withKv(async (kv) => {
    const ids: string[] = [];
    const newId = () => {
      const id = seqId("msg");
      ids.push(id);
      return id;
    };
    await enqueueBatch(kv, { brandId: "b", batch: batchOf([event(), event(), event()]), newId });
    await enqueueBatch(kv, { brandId: "b", batch: batchOf([event()]), newId });
    assert.equal(ids.length, 2);
    assert.equal(await readBacklog(kv), 4);
    assert.equal(await retireBacklogMessage(kv, ids[0]!), true);
    assert.equal(await readBacklog(kv), 1);
    // A redelivered message finishes again: nothing more is counted.
    assert.equal(await retireBacklogMessage(kv, ids[0]!), false);
    await Promise.all([retireBacklogMessage(kv, ids[1]!), retireBacklogMessage(kv, ids[1]!)]);
    assert.equal(await readBacklog(kv), 0);
    // A message this service never counted (enqueued before the backlog existed) is no error.
    assert.equal(await retireBacklogMessage(kv, "unknown"), false);
    assert.equal(await readBacklog(kv), 0);
  });
});

Deno.test("backlog: a group of messages is counted out in one commit, each once", async () => {
  await withKv(async (kv) => {
    const ids: string[] = [];
    const newId = () => {
      const id = seqId("msg");
      ids.push(id);
      return id;
    };
    for (let i = 0; i < 12; i++) {
      await enqueueBatch(kv, { brandId: "b", batch: batchOf([event(), event()]), newId });
    }
    assert.equal(await readBacklog(kv), 24);
    // One of them already retired alone (a redelivery), one never counted: no double count.
    assert.equal(await retireBacklogMessage(kv, ids[3]!), true);
    await retireBacklogMessages(kv, [...ids.slice(0, 11), "unknown"]);
    assert.equal(await readBacklog(kv), 2);
    await retireBacklogMessages(kv, ids);
    assert.equal(await readBacklog(kv), 0);
  });
});

Deno.test("backlog: a message KV dead-letters after its retries is counted out by the sweep, once", async () => {
  await withKv(async (kv) => {
    const attempts: unknown[] = [];
    const listening = kv.listenQueue((message) => {
      attempts.push(message);
      throw new Error("the database is down");
    });
    const batch = batchOf([event(), event()]);
    const ids: string[] = [];
    const newId = () => {
      ids.push(seqId("msg"));
      return ids.at(-1)!;
    };
    await enqueueBatch(kv, { brandId: "b", batch, newId, backoffMs: [10] });
    await eventually(async () => (await getDeadLetter(kv, ids[0]!)) !== null);
    // KV gave up: the dead letter is there for replay, and the events still count.
    assert.equal(await readBacklog(kv), 2);
    assert.equal(await retireUndelivered(kv), 1);
    assert.equal(await readBacklog(kv), 0);
    assert.equal(await retireUndelivered(kv), 0);
    assert.equal(await readBacklog(kv), 0);
    assert.ok(await getDeadLetter(kv, ids[0]!), "the dead letter stays for replay");
    assert.ok(attempts.length >= 2, "delivered, then retried once");
    kv.close();
    await listening;
  });
});

Deno.test("BacklogGate: refuses at the bound, counts its own admissions at once, admits again when the backlog falls", async () => {
  await withKv(async (kv) => {
    const gate = new BacklogGate(kv);
    const admitToBacklog = (_kv: Deno.Kv, events: number, max: number) => gate.admit(events, max);
    const first = await admitToBacklog(kv, 50, 100);
    assert.ok(first);
    first.settle(true);
    const second = await admitToBacklog(kv, 50, 100);
    assert.ok(second);
    // Within the cache interval the process still knows what it admitted itself.
    assert.equal(await admitToBacklog(kv, 1, 100), null);
    // An admission whose enqueue failed gives its room back.
    second.settle(false);
    const third = await admitToBacklog(kv, 50, 100);
    assert.ok(third);
    third.settle(false);
    // Another process fills the queue: seen once the cached figure expires.
    const ids: string[] = [];
    const newId = () => {
      ids.push(seqId("msg"));
      return ids.at(-1)!;
    };
    const full = Array.from({ length: 100 }, () => event());
    await enqueueBatch(kv, { brandId: "b", batch: batchOf(full), newId });
    await eventually(async () => (await admitToBacklog(kv, 1, 100)) === null);
    for (const id of ids) await retireBacklogMessage(kv, id);
    await eventually(async () => (await admitToBacklog(kv, 1, 100)) !== null);
  });
});
