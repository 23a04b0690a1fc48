import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { loadConfig } from "../../../lib/config.ts";
import { connectPostgres, type Sql } from "../../../lib/store/db.ts";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import { type EventBatch, type IngestEvent } from "../../../lib/engine/engine.ts";
import {
  type EventsMessage,
  listDeadLetters,
  readBacklog,
  replayDeadLetter,
} from "../../../lib/ingest/queue.ts";
import { migrate } from "../../../lib/store/migrations.ts";
import { openStores } from "../../../lib/store/stores.ts";
import { createQueueHandler, startForwarder } from "../../../lib/ingest/forwarder.ts";
import { createOutboxQueue } from "../../../lib/ingest/outbox.ts";
import { privatePostgresUnavailable, startPrivatePostgres } from "../../faults/private_postgres.ts";
import {
  DATABASE_URL,
  enqueueBatch,
  eventually,
  freshDatabase,
  kvQueue,
  testClock,
} from "../../test_support.ts";
import { openKv } from "../../../lib/store/kv_store.ts";

const SCOPE = "acme.myshopify.com";
const newId = monotonicFactory();

function message(events: IngestEvent[]): EventsMessage {
  const batch: EventBatch = {
    scope: SCOPE,
    source: "server",
    receivedAt: "2026-11-21T12:00:00Z",
    events,
  };
  return { kind: "events", id: newId(), brandId: "brand_1", batch };
}

function pageView(profileId: string): IngestEvent {
  return { id: newId(), eventType: "page_viewed", profileId, sessionId: "s1" };
}

async function eventCount(sql: Sql): Promise<number> {
  const [row] = await sql`select count(*)::int as n from events`;
  return row!.n;
}

async function withForwarderStores(
  fn: (kv: Deno.Kv, sql: Sql, clock: ReturnType<typeof testClock>) => Promise<void>,
): Promise<void> {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  try {
    await fn(kv, db.sql, testClock());
  } finally {
    try {
      kv.close();
    } catch { /* a test that stops its listener closes KV itself */ }
    await db.close();
  }
}

Deno.test("forwarder: the handler applies a message; a redelivery applies nothing twice", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const handle = createQueueHandler({ queue: kvQueue(kv), engine, now: clock.now });
    const msg = message([pageView("p1"), pageView("p2")]);
    await handle(msg);
    await handle(structuredClone(msg));
    assert.equal(await eventCount(sql), 2);
    const [row] = await sql`select nb_of_visits from profiles where item_id = 'p1'`;
    assert.equal(row!.nb_of_visits, 1);
    assert.deepEqual(await listDeadLetters(kv), []);
  });
});

Deno.test("forwarder: permanently rejected events go to the dead letter at once, with the reason", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const bad: IngestEvent = { id: newId(), eventType: "not_registered", profileId: "p1" };
    await createQueueHandler({ queue: kvQueue(kv), engine, now: clock.now })(
      message([pageView("p1"), bad]),
    );
    assert.equal(await eventCount(sql), 1);
    const letters = await listDeadLetters(kv);
    assert.equal(letters.length, 1);
    assert.deepEqual(letters[0]!.message.batch.events, [bad]);
    assert.match(letters[0]!.reason, /400 no registered schema/);
    assert.equal(letters[0]!.failedAt, clock.now().toISOString());
  });
});

Deno.test("forwarder: a transient failure throws so that the queue retries", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const db = await freshDatabase();
    await db.sql.end();
    const handle = createQueueHandler({
      queue: kvQueue(kv),
      engine: createEmbeddedEngine({ sql: db.sql, now: clock.now }),
      now: clock.now,
    });
    await assert.rejects(handle(message([pageView("p1")])));
    await db.close().catch(() => {});
    assert.deepEqual(await listDeadLetters(kv), []);
    assert.equal(await eventCount(sql), 0);
  });
});

Deno.test("forwarder: through the KV queue, an accepted batch becomes readable", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const listening = startForwarder({ queue: kvQueue(kv), engine, now: clock.now });
    const { batch } = message([pageView("p1"), pageView("p2"), pageView("p3")]);
    await enqueueBatch(kv, { brandId: "brand_1", batch, newId });
    await eventually(async () => (await eventCount(sql)) === 3);
    kv.close();
    await listening;
  });
});

Deno.test("forwarder: a message that always fails ends in the dead letter; replay applies it once", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    // The forwarder's database is gone, so every attempt fails.
    const gone = await freshDatabase();
    await gone.sql.end();
    const listening = startForwarder({
      queue: kvQueue(kv),
      engine: createEmbeddedEngine({ sql: gone.sql, now: clock.now }),
      now: clock.now,
    });
    const { batch } = message([pageView("p1"), pageView("p2")]);
    await enqueueBatch(kv, { brandId: "brand_1", batch, newId, backoffMs: [10, 10] });
    await eventually(async () => (await listDeadLetters(kv)).length === 1);
    const [letter] = await listDeadLetters(kv);
    assert.equal(letter!.reason, "delivery retries exhausted");
    assert.equal(letter!.message.batch.events.length, 2);

    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const outcome = await replayDeadLetter({ kv, engine, now: clock.now }, letter!.id);
    assert.deepEqual(outcome, { id: letter!.id, applied: 2, failed: [] });
    assert.equal(await eventCount(sql), 2);
    assert.deepEqual(await listDeadLetters(kv), []);
    assert.equal(await replayDeadLetter({ kv, engine, now: clock.now }, letter!.id), null);
    assert.equal(await eventCount(sql), 2);
    kv.close();
    await listening;
    await gone.close().catch(() => {});
  });
});

Deno.test("forwarder: a poison event queued past the edge is dead-lettered alone with the database's message", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const listening = startForwarder({ queue: kvQueue(kv), engine, now: clock.now });
    // As an older version, or a hand-made message, might have queued it: no edge check.
    const poison: IngestEvent = {
      id: newId(),
      eventType: "page_viewed",
      profileId: "p2",
      properties: { title: "a\u0000b" },
    };
    const { batch } = message([pageView("p1"), poison, pageView("p3")]);
    // A long retry schedule: a message that threw would not reach the dead letter in this test.
    await enqueueBatch(kv, { brandId: "brand_1", batch, newId, backoffMs: [60_000] });
    await eventually(async () => (await listDeadLetters(kv)).length === 1);
    const stored = await sql`select id from events order by id`;
    assert.deepEqual(stored.map((r) => r.id), [batch.events[0]!.id, batch.events[2]!.id]);
    const [letter] = await listDeadLetters(kv);
    assert.deepEqual(letter!.message.batch.events, [poison]);
    assert.equal(
      letter!.reason,
      `${poison.id}: 400 unsupported Unicode escape sequence: \\u0000 cannot be converted to ` +
        "text. (SQLSTATE 22P05)",
    );
    assert.equal(letter!.failedAt, clock.now().toISOString());

    // Replayed as it is, it fails again and stays; fixed, it applies once and the letter goes.
    const deps = { kv, engine, now: clock.now };
    const unchanged = await replayDeadLetter(deps, letter!.id);
    assert.equal(unchanged?.failed[0]?.eventId, poison.id);
    assert.equal((await listDeadLetters(kv)).length, 1);
    const fixed = { ...poison, properties: { title: "ab" } };
    const outcome = await replayDeadLetter(deps, letter!.id, { events: [fixed] });
    assert.deepEqual(outcome, { id: letter!.id, applied: 1, failed: [] });
    assert.deepEqual(await listDeadLetters(kv), []);
    const [row] = await sql`select properties from events where id = ${poison.id}`;
    assert.deepEqual(row!.properties, { title: "ab" });
    assert.equal(await eventCount(sql), 3);
    kv.close();
    await listening;
  });
});

const CHILD = `
  import { loadConfig } from ${
  JSON.stringify(new URL("../../../lib/config.ts", import.meta.url).href)
};
  import { openStores } from ${
  JSON.stringify(new URL("../../../lib/store/stores.ts", import.meta.url).href)
};
  import { createEmbeddedEngine } from ${
  JSON.stringify(new URL("../../../lib/engine/embedded.ts", import.meta.url).href)
};
  import { startForwarder } from ${
  JSON.stringify(new URL("../../../lib/ingest/forwarder.ts", import.meta.url).href)
};
  import { createKvQueue } from ${
  JSON.stringify(new URL("../../../lib/ingest/queue.ts", import.meta.url).href)
};
  const stores = await openStores(loadConfig(Deno.env.toObject()), { serve: true });
  const engine = createEmbeddedEngine({ sql: stores.sql, now: () => new Date() });
  const traced = {
    checkEvent: engine.checkEvent,
    async applyEvents(batch, options) {
      console.log("applying " + batch.events.length);
      return await engine.applyEvents(batch, options);
    },
  };
  console.log("ready");
  const queue = createKvQueue(stores.kv, { newId: () => crypto.randomUUID() });
  await startForwarder({ queue, engine: traced, now: () => new Date() });
`;

function spawnForwarder(env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--unstable-kv", CHILD],
    env,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    child,
    async waitFor(text: string) {
      while (!buffer.includes(text)) {
        const { value, done } = await lines.read();
        if (done) throw new Error(`forwarder exited before "${text}": ${buffer}`);
        buffer += value;
      }
    },
    async stop(signal: Deno.Signal) {
      child.kill(signal);
      await child.status;
      await lines.cancel();
    },
  };
}

Deno.test("forwarder: killed mid-message (SIGKILL), it loses nothing after a restart", async () => {
  const dataDir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  const env = { DATA_DIR: dataDir, DATABASE_URL: database?.url ?? "" };
  const config = loadConfig(env);
  const ids = [pageView("p1"), pageView("p2")];
  try {
    // Slow the engine down so that the kill lands inside its transaction.
    let stores = await openStores(config, { serve: false });
    await stores.sql`
      create function slow_insert() returns trigger language plpgsql as $$
      begin perform pg_sleep(30); return new; end $$`;
    await stores
      .sql`create trigger slow before insert on events for each row execute function slow_insert()`;
    await enqueueBatch(stores.kv, { brandId: "brand_1", batch: message(ids).batch, newId });
    await stores.close();

    const first = spawnForwarder(env);
    await first.waitFor("applying 2");
    await new Promise((resolve) => setTimeout(resolve, 300));
    await first.stop("SIGKILL");
    // Deno KV requeues a message whose consumer stopped renewing its 5 s lease; the next
    // process to open the store after that deadline finds it at once.
    await new Promise((resolve) => setTimeout(resolve, 5_500));

    stores = await openStores(config, { serve: false });
    assert.equal(await eventCount(stores.sql), 0);
    await stores.sql`drop trigger slow on events`;
    await stores.close();

    const second = spawnForwarder(env);
    try {
      await second.waitFor("ready");
      stores = await openStores(config, { serve: false });
      try {
        await eventually(async () => (await eventCount(stores.sql)) === 2);
        const rows = await stores.sql`select id from events order by id`;
        assert.deepEqual(rows.map((r) => r.id), ids.map((e) => e.id).sort());
      } finally {
        await stores.close();
      }
    } finally {
      await second.stop("SIGTERM");
    }
  } finally {
    await database?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("forwarder: at most `concurrency` messages apply at once; the others wait their turn", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    let running = 0;
    let peak = 0;
    const gates: (() => void)[] = [];
    const gated = {
      checkEvent: engine.checkEvent,
      async applyEvents(batch: EventBatch) {
        running++;
        peak = Math.max(peak, running);
        await new Promise<void>((resolve) => gates.push(resolve));
        try {
          return await engine.applyEvents(batch);
        } finally {
          running--;
        }
      },
    };
    const handle = createQueueHandler({
      queue: kvQueue(kv),
      engine: gated,
      now: clock.now,
      concurrency: 2,
    });
    let settled = 0;
    const handled = Array.from(
      { length: 5 },
      (_, i) => handle(message([pageView(`p${i}`)])).finally(() => settled++),
    );
    await eventually(() => gates.length === 2);
    // Release one at a time: a waiting message starts only when a slot frees up. Loop until every
    // message settled: on a loaded machine the next one may take a while to reach its gate.
    while (settled < handled.length) {
      gates.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await Promise.all(handled);
    assert.equal(peak, 2);
    assert.equal(await eventCount(sql), 5);
  });
});

Deno.test("forwarder: with a wake-up, a listener on another handle of the store gets the messages", async () => {
  const path = await Deno.makeTempFile({ suffix: ".sqlite3" });
  // Opened as the service opens KV (busy retries): two handles on one file can find it locked.
  const service = await openKv(path);
  const worker = await openKv(path);
  const db = await freshDatabase();
  try {
    const clock = testClock();
    const engine = createEmbeddedEngine({ sql: db.sql, now: clock.now });
    const listening = startForwarder({
      queue: kvQueue(worker),
      engine,
      now: clock.now,
      wakeMs: 50,
    });
    const { batch } = message([pageView("p1"), pageView("p2")]);
    await enqueueBatch(service, { brandId: "brand_1", batch, newId });
    await eventually(async () => (await eventCount(db.sql)) === 2);
    worker.close();
    await listening;
    // The wake-up messages themselves are never dead letters.
    assert.deepEqual(await listDeadLetters(service), []);
  } finally {
    service.close();
    await db.close();
    for (const file of [path, `${path}-wal`, `${path}-shm`]) {
      await Deno.remove(file).catch(() => {});
    }
  }
});

Deno.test("forwarder: a finished message leaves the backlog, applied or dead-lettered, once", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const handle = createQueueHandler({ queue: kvQueue(kv), engine, now: clock.now });
    const received: EventsMessage[] = [];
    const listening = kv.listenQueue((m) => void received.push(m as EventsMessage));
    const bad: IngestEvent = { id: newId(), eventType: "not_registered", profileId: "p1" };
    const events = [pageView("p1"), pageView("p2"), bad];
    await enqueueBatch(kv, { brandId: "brand_1", batch: message(events).batch, newId });
    await enqueueBatch(kv, { brandId: "brand_1", batch: message([pageView("p3")]).batch, newId });
    await eventually(() => received.length === 2);
    // KV does not promise to deliver the two in the order they were enqueued.
    const [first, second] = received[0]!.batch.events.length === 3
      ? [received[0]!, received[1]!]
      : [received[1]!, received[0]!];
    assert.equal(await readBacklog(kv), 4);
    await handle(first);
    assert.equal(await readBacklog(kv), 1);
    // Redelivered after it finished (a crash before KV's acknowledgement): counted out once.
    await handle(structuredClone(first));
    assert.equal(await readBacklog(kv), 1);
    assert.equal((await listDeadLetters(kv)).length, 1);
    await handle(second);
    assert.equal(await readBacklog(kv), 0);
    assert.equal(await eventCount(sql), 3);
    kv.close();
    await listening;
  });
});

Deno.test("forwarder: a message that fails stays in the backlog until it is finished", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const down = await freshDatabase();
    await down.sql.end();
    const failing = createQueueHandler({
      queue: kvQueue(kv),
      engine: createEmbeddedEngine({ sql: down.sql, now: clock.now }),
      now: clock.now,
    });
    const received: EventsMessage[] = [];
    const listening = kv.listenQueue((m) => void received.push(m as EventsMessage));
    await enqueueBatch(kv, { brandId: "brand_1", batch: message([pageView("p1")]).batch, newId });
    await eventually(() => received.length === 1);
    await assert.rejects(failing(received[0]!));
    await down.close().catch(() => {});
    assert.equal(await readBacklog(kv), 1);
    await createQueueHandler({
      queue: kvQueue(kv),
      engine: createEmbeddedEngine({ sql, now: clock.now }),
      now: clock.now,
    })(
      received[0]!,
    );
    assert.equal(await readBacklog(kv), 0);
    kv.close();
    await listening;
  });
});

Deno.test({
  name: "forwarder: a message waits for an unreachable database instead of using up its retries",
  ignore: privatePostgresUnavailable() !== null,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const pg = await startPrivatePostgres();
    const kv = await Deno.openKv(":memory:");
    let sql: Sql | undefined;
    try {
      const setup = connectPostgres(pg.url, 1);
      await migrate(setup);
      await setup.end();
      sql = connectPostgres(pg.url, 2);
      const clock = testClock();
      const engine = createEmbeddedEngine({ sql, now: clock.now });
      const listening = startForwarder({ queue: kvQueue(kv), engine, now: clock.now });
      await pg.stop("fast");
      const batch: EventBatch = {
        scope: SCOPE,
        source: "server",
        receivedAt: "2026-11-21T12:00:00Z",
        events: [pageView("p1"), pageView("p2")],
      };
      // Two quick retries: without the wait, the message is dead-lettered well within the outage.
      await enqueueBatch(kv, { brandId: "brand_1", batch, newId, backoffMs: [50, 50] });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await pg.start();
      await eventually(async () => (await eventCount(sql!)) === 2, 20_000);
      assert.deepEqual(await listDeadLetters(kv), []);
      kv.close();
      await listening;
    } finally {
      try {
        kv.close();
      } catch { /* closed above */ }
      await sql?.end({ timeout: 1 });
      await pg.remove();
    }
  },
});

Deno.test("forwarder: messages waiting for a turn apply as one group; each is settled on its own", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const groups: number[] = [];
    const traced = {
      ...engine,
      applyEventGroup(batches: EventBatch[]) {
        groups.push(batches.length);
        return engine.applyEventGroup!(batches);
      },
    };
    const bad: IngestEvent = { id: newId(), eventType: "not_registered", profileId: "p1" };
    const received: EventsMessage[] = [];
    const listening = kv.listenQueue((m) => void received.push(m as EventsMessage));
    for (let i = 0; i < 6; i++) {
      const events = i === 2 ? [pageView(`p${i}`), bad] : [pageView(`p${i}`)];
      await enqueueBatch(kv, { brandId: "brand_1", batch: message(events).batch, newId });
    }
    await eventually(() => received.length === 6);
    assert.equal(await readBacklog(kv), 7);
    const handle = createQueueHandler({
      queue: kvQueue(kv),
      engine: traced,
      now: clock.now,
      concurrency: 1,
    });
    await Promise.all(received.map((m) => handle(m)));
    // The first message starts alone at once; the five that waited for its turn go together.
    assert.deepEqual(groups, [5]);
    assert.equal(await eventCount(sql), 6);
    assert.equal(await readBacklog(kv), 0);
    const letters = await listDeadLetters(kv);
    assert.deepEqual(letters.map((l) => l.message.batch.events.map((e) => e.id)), [[bad.id]]);
    kv.close();
    await listening;
  });
});

Deno.test("forwarder: a group that fails is applied message by message, so a fault stays its own", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const poison = pageView("poison");
    const faulty = {
      checkEvent: engine.checkEvent,
      async applyEvents(batch: EventBatch) {
        if (batch.events.some((e) => e.id === poison.id)) throw new Error("engine fault");
        return await engine.applyEvents(batch);
      },
      async applyEventGroup(batches: EventBatch[]) {
        if (batches.some((b) => b.events.some((e) => e.id === poison.id))) {
          throw new Error("engine fault");
        }
        return await engine.applyEventGroup!(batches);
      },
    };
    const handle = createQueueHandler({
      queue: kvQueue(kv),
      engine: faulty,
      now: clock.now,
      concurrency: 1,
    });
    const messages = [[pageView("a")], [pageView("b")], [poison], [pageView("c")]].map(message);
    const settled = await Promise.allSettled(messages.map((m) => handle(m)));
    assert.deepEqual(settled.map((s) => s.status), [
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
    ]);
    assert.equal(await eventCount(sql), 3);
  });
});

for (const kind of ["kv", "outbox"] as const) {
  Deno.test(`forwarder (${kind} queue): afterApply gets each applied group's scope and profiles, before the group leaves the backlog`, async () => {
    await withForwarderStores(async (kv, sql, clock) => {
      const queue = kind === "kv" ? kvQueue(kv) : createOutboxQueue(kv, { newId });
      const engine = createEmbeddedEngine({ sql, now: clock.now });
      const applied: { scope: string; profileIds: string[] }[] = [];
      const backlogSeen: number[] = [];
      const listening = startForwarder({
        queue,
        engine,
        now: clock.now,
        afterApply: async (group) => {
          backlogSeen.push(await readBacklog(kv));
          applied.push(group);
        },
      });
      // A refused event's profile is not among those the group touched.
      const bad: IngestEvent = { id: newId(), eventType: "not_registered", profileId: "p9" };
      await queue.accept({
        brandId: "brand_1",
        batch: message([pageView("p1"), pageView("p2"), pageView("p1"), bad]).batch,
      });
      await eventually(() => applied.length === 1);
      assert.deepEqual(applied[0]!.scope, SCOPE);
      assert.deepEqual(applied[0]!.profileIds.sort(), ["p1", "p2"]);
      // The group's four events were still in the backlog when its hook ran: an empty backlog
      // means every hook has run (what it maintains is under way).
      assert.deepEqual(backlogSeen, [4]);
      await eventually(async () => await readBacklog(kv) === 0);
      assert.equal(await eventCount(sql), 3);
      assert.equal((await listDeadLetters(kv)).length, 1);
      queue.stop();
      kv.close();
      await listening;
    });
  });
}

Deno.test("forwarder: afterApply is told how many messages the forwarder holds besides the group", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const seen: { profileIds: string[]; pending: number }[] = [];
    const handle = createQueueHandler({
      queue: kvQueue(kv),
      engine,
      now: clock.now,
      concurrency: 1,
      afterApply: ({ profileIds, pending }) => {
        seen.push({ profileIds: profileIds.sort(), pending });
        return Promise.resolve();
      },
    });
    // Three handed over at once, one slot: the first applies alone while the two others wait
    // (it is told of them), then those two together (nothing follows).
    await Promise.all([
      handle(message([pageView("p1")])),
      handle(message([pageView("p2")])),
      handle(message([pageView("p3")])),
    ]);
    assert.deepEqual(seen, [
      { profileIds: ["p1"], pending: 2 },
      { profileIds: ["p2", "p3"], pending: 0 },
    ]);
  });
});

Deno.test("forwarder: an afterApply that fails fails the delivery; the redelivery applies nothing twice and calls it again", async () => {
  await withForwarderStores(async (kv, sql, clock) => {
    const engine = createEmbeddedEngine({ sql, now: clock.now });
    const calls: string[][] = [];
    let down = true;
    const handle = createQueueHandler({
      queue: kvQueue(kv),
      engine,
      now: clock.now,
      afterApply({ profileIds }) {
        calls.push(profileIds);
        return down ? Promise.reject(new Error("the hook's store is down")) : Promise.resolve();
      },
    });
    const delivery = message([pageView("p1"), pageView("p2")]);
    await assert.rejects(handle(delivery), /the hook's store is down/);
    assert.equal(await eventCount(sql), 2);
    down = false;
    await handle(structuredClone(delivery));
    assert.deepEqual(calls, [["p1", "p2"], ["p1", "p2"]]);
    assert.equal(await eventCount(sql), 2);
    assert.deepEqual(await listDeadLetters(kv), []);
  });
});
