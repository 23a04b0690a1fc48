import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  applyEventBatches,
  clampPixelTime,
  dataErrorMessage,
  mergeProfiles,
  PIXEL_NOT_ANONYMOUS,
} from "../../../lib/engine/apply_events.ts";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import {
  createCommitGate,
  type Engine,
  type EventBatch,
  type IngestEvent,
} from "../../../lib/engine/engine.ts";
import { EVENT_REGISTRY_VERSION } from "../../../lib/engine/event_types.ts";
import { closeScopeWrites, SHOP_ERASED_MESSAGE } from "../../../lib/tenancy/brands.ts";
import { databaseFailure, type Sql, type Tx } from "../../../lib/store/db.ts";
import { DATABASE_URL, eventually, freshDatabase, testClock } from "../../test_support.ts";

const SCOPE = "acme.myshopify.com";
const newId = monotonicFactory();

function event(fields: Partial<IngestEvent> & { profileId: string }): IngestEvent {
  return { id: newId(), eventType: "page_viewed", ...fields };
}

function batch(
  events: IngestEvent[],
  source: "server" | "pixel" = "server",
  scope = SCOPE,
): EventBatch {
  return { scope, source, receivedAt: "2026-11-21T12:00:00.000Z", events };
}

async function withEngine(
  fn: (engine: Engine, sql: Sql, clock: ReturnType<typeof testClock>) => Promise<void>,
) {
  const db = await freshDatabase();
  const clock = testClock();
  try {
    await fn(createEmbeddedEngine({ sql: db.sql, now: clock.now }), db.sql, clock);
  } finally {
    await db.close();
  }
}

async function profile(sql: Sql, id: string, scope = SCOPE) {
  const [row] = await sql`
    select item_id, properties, provenance, first_visit, last_visit, nb_of_visits
    from profiles where scope = ${scope} and item_id = ${id}`;
  return row;
}

async function count(sql: Sql, table: "events" | "sessions" | "profiles", scope = SCOPE) {
  const [row] = await sql`select count(*)::int as n from ${sql(table)} where scope = ${scope}`;
  return row!.n as number;
}

const update = (
  profileId: string,
  fields: Record<string, unknown>,
  extra: Partial<IngestEvent> = {},
) => event({ profileId, eventType: "updateProperties", properties: fields, ...extra });

Deno.test("engine: a first event creates a server profile with visit fields and the scope stamp", async () => {
  await withEngine(async (engine, sql) => {
    const results = await engine.applyEvents(batch([
      event({ profileId: "store_acme_1", timeStamp: "2026-11-20T10:00:00Z", sessionId: "s1" }),
      event({ profileId: "store_acme_1", timeStamp: "2026-11-20T11:00:00Z", sessionId: "s1" }),
    ]));
    assert.deepEqual(results.map((r) => r.ok && r.result), [
      { updated: 0, processedItems: 1 },
      { updated: 0, processedItems: 1 },
    ]);
    const row = await profile(sql, "store_acme_1");
    assert.equal(row!.provenance, "server");
    assert.deepEqual(row!.properties, { shopDomain: SCOPE });
    assert.equal(row!.first_visit.toISOString(), "2026-11-20T10:00:00.000Z");
    assert.equal(row!.last_visit.toISOString(), "2026-11-20T11:00:00.000Z");
    assert.equal(row!.nb_of_visits, 1);
    assert.equal(await count(sql, "events"), 2);
  });
});

Deno.test("engine: re-applying a batch (redelivery) stores nothing twice and counts no visit twice", async () => {
  await withEngine(async (engine, sql) => {
    const events = [
      event({ profileId: "p1", sessionId: "s1" }),
      event({ profileId: "p1", sessionId: "s2" }),
      update("p1", { update: { "properties.email": "a@example.com" } }),
    ];
    await engine.applyEvents(batch(events));
    const again = await engine.applyEvents(batch(events));
    assert.ok(again.every((r) => r.ok && r.result.processedItems === 0 && r.result.updated === 0));
    assert.equal(await count(sql, "events"), 3);
    const row = await profile(sql, "p1");
    assert.equal(row!.nb_of_visits, 3); // s1, s2 and the day session of the update
    assert.equal(row!.properties.email, "a@example.com");
  });
});

Deno.test("engine: events without a sessionId are one session while their gaps stay under 30 minutes", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([
      event({ profileId: "p1", timeStamp: "2026-11-20T08:00:00Z" }),
      event({ profileId: "p1", timeStamp: "2026-11-20T08:29:59Z" }),
      event({ profileId: "p1", timeStamp: "2026-11-20T23:50:00Z" }),
    ]));
    // Past midnight UTC, 20 minutes after the last event: the same session.
    await engine.applyEvents(
      batch([event({ profileId: "p1", timeStamp: "2026-11-21T00:10:00Z" })]),
    );
    assert.equal((await profile(sql, "p1"))!.nb_of_visits, 2);
    const sessions = await sql`select item_id, event_count from sessions order by item_id`;
    assert.deepEqual([...sessions], [
      { item_id: "p1:2026-11-20T08:00:00.000Z", event_count: 2 },
      { item_id: "p1:2026-11-20T23:50:00.000Z", event_count: 2 },
    ]);
  });
});

Deno.test("engine: a missing timeStamp defaults to the time of forwarding", async () => {
  await withEngine(async (engine, sql, clock) => {
    await engine.applyEvents(batch([event({ profileId: "p1" })]));
    const [row] = await sql`select time_stamp from events`;
    assert.equal(row!.time_stamp.toISOString(), clock.now().toISOString());
  });
});

Deno.test("engine: updateProperties sets, adds, removes, and reports updated", async () => {
  await withEngine(async (engine, sql) => {
    const first = await engine.applyEvents(batch([
      update("p1", {
        update: { "properties.email": "a@example.com", "properties.firstName": "Ann" },
        add: { "properties.city": "Paris" },
      }),
    ]));
    assert.deepEqual(first[0], {
      ok: true,
      status: 200,
      result: { updated: 1, processedItems: 1 },
    });
    await engine.applyEvents(batch([
      update("p1", {
        update: { "properties.firstName": null },
        add: { "properties.city": "Lyon", "properties.zipCode": "75001" },
      }),
    ]));
    const same = await engine.applyEvents(batch([
      update("p1", { update: { "properties.email": "a@example.com" } }),
    ]));
    assert.deepEqual(same[0], { ok: true, status: 200, result: { updated: 0, processedItems: 1 } });
    await engine.applyEvents(batch([update("p1", { delete: { "properties.zipCode": true } })]));
    assert.deepEqual((await profile(sql, "p1"))!.properties, {
      shopDomain: SCOPE,
      email: "a@example.com",
      city: "Paris",
    });
  });
});

Deno.test("engine: permanent rejections are per event; the rest of the batch applies", async () => {
  await withEngine(async (engine, sql) => {
    const results = await engine.applyEvents(batch([
      event({ profileId: "p1", eventType: "no_such_type" }),
      update("p1", { update: { "properties.email": "x@example.com" }, targetId: "someone_else" }),
      update("p1", { update: { email: "missing prefix" } }),
      event({ profileId: "p1", eventType: "search_submitted", properties: {} }),
      event({ profileId: "p1" }),
    ]));
    assert.deepEqual(results.map((r) => [r.ok, r.status]), [
      [false, 400],
      [false, 403],
      [false, 400],
      [false, 400],
      [true, 200],
    ]);
    assert.match((results[0] as { error: string }).error, /no registered schema/);
    assert.match((results[3] as { error: string }).error, /properties\.query/);
    assert.equal(await count(sql, "events"), 1);
    assert.deepEqual((await profile(sql, "p1"))!.properties, { shopDomain: SCOPE });
  });
});

Deno.test("engine: a batch the edge checked under this event registry is not checked again; under another it is", async () => {
  await withEngine(async (engine, sql) => {
    // An event the registry refuses: only a batch stamped by this version skips the check
    // (the edge refused such an event before stamping; here the stamp is forged to tell).
    const odd = () => event({ profileId: "p1", eventType: "no_such_type" });
    const stale = await engine.applyEvents({ ...batch([odd()]), checked: "0.old" });
    assert.deepEqual(stale.map((r) => [r.ok, r.status]), [[false, 400]]);
    const unstamped = await engine.applyEvents(batch([odd()]));
    assert.deepEqual(unstamped.map((r) => [r.ok, r.status]), [[false, 400]]);
    assert.equal(await count(sql, "events"), 0);
    const trusted = await engine.applyEvents({
      ...batch([odd()]),
      checked: EVENT_REGISTRY_VERSION,
    });
    assert.deepEqual(trusted.map((r) => [r.ok, r.status]), [[true, 200]]);
    assert.equal(await count(sql, "events"), 1);
    // What a hand edit could break is still looked at.
    const badTime = await engine.applyEvents({
      ...batch([event({ profileId: "p1", timeStamp: "not a time" })]),
      checked: EVENT_REGISTRY_VERSION,
    });
    assert.deepEqual(badTime.map((r) => [r.ok, r.status]), [[false, 400]]);
  });
});

Deno.test("engine: a server event naming a pixel profile makes it merged", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([event({ profileId: "anon_1" })], "pixel"));
    assert.equal((await profile(sql, "anon_1"))!.provenance, "pixel");
    await engine.applyEvents(
      batch([update("anon_1", { update: { "properties.email": "b@example.com" } })]),
    );
    assert.equal((await profile(sql, "anon_1"))!.provenance, "merged");
  });
});

Deno.test("engine: profiles sharing a mergeIdentifier merge into the oldest; ids and histories stay", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([event({ profileId: "anon_1", sessionId: "web1" })], "pixel"));
    await engine.applyEvents(batch([event({ profileId: "anon_1", sessionId: "web1" })], "pixel"));
    await engine.applyEvents(batch([
      event({ profileId: "store_acme_7", sessionId: "srv1" }),
      update("store_acme_7", {
        update: { "properties.mergeIdentifier": "cust-7", "properties.email": "c@example.com" },
      }),
    ]));
    // The pixel profile learns the same identifier (e.g. after a storefront login).
    await engine.applyEvents(batch([
      update("anon_1", {
        update: { "properties.mergeIdentifier": "cust-7", "properties.city": "Oslo" },
      }),
    ]));
    // As in Apache Unomi, the profile created first (the pixel one) survives.
    assert.equal(await count(sql, "profiles"), 1);
    const merged = await profile(sql, "anon_1");
    assert.equal(merged!.provenance, "merged");
    assert.equal(merged!.properties.email, "c@example.com");
    assert.equal(merged!.properties.city, "Oslo");
    const [alias] =
      await sql`select profile_id from profile_aliases where alias_id = 'store_acme_7'`;
    assert.equal(alias!.profile_id, "anon_1");
    // Both histories are kept and an event to the absorbed id lands on the survivor.
    await engine.applyEvents(batch([event({ profileId: "store_acme_7", sessionId: "srv2" })]));
    // The pixel may no longer write the merged profile, under either id.
    const pixel = await engine.applyEvents(batch([
      event({ profileId: "anon_1", sessionId: "web2" }),
      event({ profileId: "store_acme_7", sessionId: "web3" }),
    ], "pixel"));
    assert.deepEqual(pixel.map((r) => r.status), [403, 403]);
    assert.equal(await count(sql, "profiles"), 1);
    const [events] = await sql`
      select count(*)::int as n from events
      where profile_id in (select 'anon_1' union select alias_id from profile_aliases where profile_id = 'anon_1')`;
    assert.equal(events!.n, 6);
    assert.equal((await profile(sql, "anon_1"))!.nb_of_visits, 5);
  });
});

Deno.test("engine: a server event whose target is a pixel profile merges it", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([event({ profileId: "anon_9" })], "pixel"));
    await engine.applyEvents(batch([
      event({ profileId: "store_acme_9", target: { itemId: "anon_9", itemType: "profile" } }),
    ]));
    assert.equal(await profile(sql, "anon_9"), undefined);
    assert.equal((await profile(sql, "store_acme_9"))!.provenance, "merged");
    // The same from the pixel side is not trusted: no merge.
    await engine.applyEvents(batch([event({ profileId: "anon_10" })], "pixel"));
    await engine.applyEvents(batch([
      event({ profileId: "anon_11", target: { itemId: "anon_10", itemType: "profile" } }),
    ], "pixel"));
    assert.equal((await profile(sql, "anon_10"))!.provenance, "pixel");
  });
});

Deno.test("engine: merging is idempotent and re-points earlier aliases", async () => {
  await withEngine(async (engine, sql, clock) => {
    await engine.applyEvents(batch([
      event({ profileId: "a" }),
      event({ profileId: "b" }),
      event({ profileId: "c" }),
    ]));
    await sql.begin(async (tx) => {
      assert.equal(await mergeProfiles(tx, SCOPE, "a", "b", clock.now()), "a");
      assert.equal(await mergeProfiles(tx, SCOPE, "b", "c", clock.now()), "a");
      assert.equal(await mergeProfiles(tx, SCOPE, "c", "a", clock.now()), "a");
      assert.equal(await mergeProfiles(tx, SCOPE, "a", "missing", clock.now()), null);
    });
    const aliases = await sql`select alias_id, profile_id from profile_aliases order by alias_id`;
    assert.deepEqual([...aliases], [
      { alias_id: "b", profile_id: "a" },
      { alias_id: "c", profile_id: "a" },
    ]);
  });
});

Deno.test("engine: scopes never mix, even for the same profile id", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([update("p1", { update: { "properties.email": "a@a.com" } })]));
    await engine.applyEvents(batch([event({ profileId: "p1" })], "server", "other.myshopify.com"));
    assert.equal((await profile(sql, "p1", "other.myshopify.com"))!.properties.email, undefined);
    assert.equal(
      (await profile(sql, "p1", "other.myshopify.com"))!.properties.shopDomain,
      "other.myshopify.com",
    );
  });
});

Deno.test("engine: concurrent batches for one new profile lose no update and no visit", async () => {
  await withEngine(async (engine, sql) => {
    await Promise.all(Array.from({ length: 8 }, (_, i) =>
      engine.applyEvents(batch([
        event({ profileId: "hot", sessionId: `s${i}` }),
        update("hot", { update: { [`properties.k${i}`]: i } }),
      ]))));
    const row = await profile(sql, "hot");
    assert.equal(row!.nb_of_visits, 8 + 1);
    for (let i = 0; i < 8; i++) assert.equal(row!.properties[`k${i}`], i);
  });
});

Deno.test("engine: past its deadline a batch stores nothing", async () => {
  await withEngine(async (engine, sql) => {
    await assert.rejects(
      engine.applyEvents(batch([event({ profileId: "late" })]), { deadline: Date.now() - 1 }),
      /deadline/,
    );
    // A batch that runs over mid-transaction is rolled back too.
    await sql`
      create function slow_insert() returns trigger language plpgsql as $$
      begin perform pg_sleep(0.3); return new; end $$`;
    await sql`create trigger slow before insert on events for each row execute function slow_insert()`;
    await assert.rejects(
      engine.applyEvents(batch([event({ profileId: "late" })]), { deadline: Date.now() + 100 }),
    );
    assert.equal(await count(sql, "events"), 0);
    assert.equal(await count(sql, "profiles"), 0);
  });
});

Deno.test("engine: a gate the budget closed first refuses the commit; an open one lets it and says so", async () => {
  await withEngine(async (engine, sql) => {
    const closed = createCommitGate();
    assert.equal(closed.expire(), true);
    await assert.rejects(
      engine.applyEvents(batch([event({ profileId: "late" })]), { gate: closed }),
      /budget ran out before the commit/,
    );
    assert.equal(await count(sql, "events"), 0);
    assert.equal(await count(sql, "profiles"), 0);

    const open = createCommitGate();
    const results = await engine.applyEvents(batch([event({ profileId: "on_time" })]), {
      gate: open,
    });
    assert.equal(results[0]!.ok, true);
    assert.equal(open.committing, true);
    // Once the commit has begun, the budget can no longer run out.
    assert.equal(open.expire(), false);
    assert.equal(await count(sql, "events"), 1);
  });
});

Deno.test("engine: a scope whose shop was erased (shop/redact) stores nothing; each event is a 403", async () => {
  await withEngine(async (engine, sql) => {
    await sql`insert into brands (id, name) values ('b1', 'B')`;
    await sql`
      insert into integrations (id, integration_id, brand_id, shop_domain, status, redacted_at)
      values ('i1', ${crypto.randomUUID()}, 'b1', ${SCOPE}, 'disconnected', now())`;
    const events = [event({ profileId: "p1" }), update("p1", { update: { "properties.a": 1 } })];
    const results = await engine.applyEvents(batch(events));
    assert.deepEqual(results, [
      { ok: false, status: 403, error: SHOP_ERASED_MESSAGE },
      { ok: false, status: 403, error: SHOP_ERASED_MESSAGE },
    ]);
    assert.equal(await count(sql, "events"), 0);
    assert.equal(await count(sql, "profiles"), 0);
    // Another scope is not concerned.
    await engine.applyEvents(batch([event({ profileId: "p1" })], "server", "other.myshopify.com"));
    assert.equal(await count(sql, "events", "other.myshopify.com"), 1);
  });
});

Deno.test({
  name: "engine: a batch that arrives while shop/redact runs waits for it, then stores nothing",
  // PGlite runs one transaction at a time: the two can never overlap there.
  ignore: !DATABASE_URL,
  async fn() {
    await withEngine(async (engine, sql) => {
      await sql`insert into brands (id, name) values ('b1', 'B')`;
      await sql`
        insert into integrations (id, integration_id, brand_id, shop_domain, status)
        values ('i1', ${crypto.randomUUID()}, 'b1', ${SCOPE}, 'connected')`;
      let release!: () => void;
      let closed!: () => void;
      const held = new Promise<void>((resolve) => release = resolve);
      const locked = new Promise<void>((resolve) => closed = resolve);
      const erasing = sql.begin(async (tx) => {
        await closeScopeWrites(tx as unknown as Tx, SCOPE, new Date());
        closed();
        await held;
      });
      await locked;
      // The erasure holds the scope's lock; the batch waits for it (observed, not timed).
      const applying = engine.applyEvents(batch([event({ profileId: "late" })]));
      await eventually(async () =>
        (await sql`
          select 1 from pg_locks
          where locktype = 'advisory' and not granted
            and database = (select oid from pg_database where datname = current_database())`)
          .length > 0
      );
      release();
      await erasing;
      assert.deepEqual(await applying, [{ ok: false, status: 403, error: SHOP_ERASED_MESSAGE }]);
      assert.equal(await count(sql, "events"), 0);
      assert.equal(await count(sql, "profiles"), 0);
    });
  },
});

// --- the visits-only statements (no updateProperties, no merge target) ---

Deno.test("engine: plain server events on a pixel profile make it merged; only the first reports updated", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([event({ profileId: "anon_1", sessionId: "s1" })], "pixel"));
    const first = await engine.applyEvents(batch([
      event({ profileId: "anon_1", sessionId: "s1", timeStamp: "2026-11-21T12:00:02Z" }),
      event({ profileId: "anon_1", sessionId: "s2", timeStamp: "2026-11-21T12:00:01Z" }),
      event({ profileId: "fresh_1", sessionId: "s3" }),
    ]));
    // The earliest event of the profile is the one that changed it.
    assert.deepEqual(first.map((r) => r.ok && r.result.updated), [0, 1, 0]);
    const row = (await profile(sql, "anon_1"))!;
    assert.equal(row.provenance, "merged");
    assert.equal(row.nb_of_visits, 2);
    assert.equal((await profile(sql, "fresh_1"))!.provenance, "server");
    // A pixel event never changes a server or merged profile: it is refused.
    const pixel = await engine.applyEvents(batch([event({ profileId: "fresh_1" })], "pixel"));
    assert.deepEqual(pixel.map((r) => r.status), [403]);
    assert.equal((await profile(sql, "fresh_1"))!.provenance, "server");
  });
});

Deno.test("engine: plain events keep visit spans, session counts and redelivery exact", async () => {
  await withEngine(async (engine, sql) => {
    const events = [
      event({ profileId: "p", sessionId: "s1", timeStamp: "2026-11-21T10:00:00Z" }),
      event({ profileId: "p", sessionId: "s1", timeStamp: "2026-11-21T09:00:00Z" }),
      event({ profileId: "p", sessionId: "s2", timeStamp: "2026-11-21T11:00:00Z" }),
    ];
    await engine.applyEvents(batch(events));
    const again = await engine.applyEvents(batch(events));
    assert.deepEqual(again.map((r) => r.ok && r.result.processedItems), [0, 0, 0]);
    const row = (await profile(sql, "p"))!;
    assert.equal(row.nb_of_visits, 2);
    assert.equal(row.first_visit.toISOString(), "2026-11-21T09:00:00.000Z");
    assert.equal(row.last_visit.toISOString(), "2026-11-21T11:00:00.000Z");
    const [s1] = await sql`
      select first_event_at, last_event_at, event_count from sessions where item_id = 's1'`;
    assert.equal(s1!.event_count, 2);
    assert.equal(s1!.first_event_at.toISOString(), "2026-11-21T09:00:00.000Z");
    // A later batch widens the span and adds no visit for a known session.
    await engine.applyEvents(batch([
      event({ profileId: "p", sessionId: "s2", timeStamp: "2026-11-21T12:00:00Z" }),
    ]));
    const later = (await profile(sql, "p"))!;
    assert.equal(later.nb_of_visits, 2);
    assert.equal(later.last_visit.toISOString(), "2026-11-21T12:00:00.000Z");
  });
});

Deno.test("engine: plain events sent to an absorbed id land on the survivor", async () => {
  await withEngine(async (engine, sql, clock) => {
    await engine.applyEvents(batch([event({ profileId: "a" }), event({ profileId: "b" })]));
    await sql.begin((tx) => mergeProfiles(tx, SCOPE, "a", "b", clock.now()));
    await engine.applyEvents(batch([
      event({ profileId: "b", sessionId: "late", timeStamp: "2026-11-22T00:00:00Z" }),
    ]));
    assert.equal(await profile(sql, "b"), undefined);
    const survivor = (await profile(sql, "a"))!;
    assert.equal(survivor.nb_of_visits, 3);
    assert.equal(survivor.last_visit.toISOString(), "2026-11-22T00:00:00.000Z");
    const [session] = await sql`select profile_id from sessions where item_id = 'late'`;
    assert.equal(session!.profile_id, "a");
  });
});

Deno.test("engine: concurrent plain and update batches on shared profiles lose no visit", async () => {
  await withEngine(async (engine, sql) => {
    // Both kinds lock profiles in id order, then sessions: no deadlock, no lost update.
    await Promise.all(Array.from({ length: 12 }, (_, i) =>
      engine.applyEvents(batch([
        event({ profileId: "x", sessionId: `x${i}` }),
        event({ profileId: "y", sessionId: `y${i % 3}` }),
        ...(i % 2 ? [update("x", { update: { [`properties.k${i}`]: i } })] : []),
      ]))));
    // x: twelve sessions plus the updates' one generated session (their batches take turns on
    // the profile's session lock, so each sees the one before); y: three sessions.
    assert.equal((await profile(sql, "x"))!.nb_of_visits, 12 + 1);
    assert.equal((await profile(sql, "y"))!.nb_of_visits, 3);
    assert.equal(await count(sql, "events"), 12 * 2 + 6);
  });
});

Deno.test("engine: concurrent plain batches naming one new session count it once", async () => {
  await withEngine(async (engine, sql) => {
    // On PostgreSQL these race: each batch may see the session as new before another stores it.
    await Promise.all(Array.from({ length: 8 }, (_, i) =>
      engine.applyEvents(batch([
        event({ profileId: "hot", sessionId: "shared" }),
        event({ profileId: `own${i}`, sessionId: "claimed" }),
      ]))));
    assert.equal((await profile(sql, "hot"))!.nb_of_visits, 1);
    // A session belongs to the profile that stored it first; the others gain no visit from it.
    const [owners] = await sql`
      select sum(nb_of_visits)::int as visits, count(*)::int as n from profiles
      where scope = ${SCOPE} and item_id like 'own%'`;
    assert.deepEqual({ ...owners }, { visits: 1, n: 8 });
    const [claimed] = await sql`select event_count from sessions where item_id = 'claimed'`;
    assert.equal(claimed!.event_count, 8);
  });
});

Deno.test("engine: plain and update batches agree on a session shared by several profiles", async () => {
  await withEngine(async (engine, sql) => {
    const events = () => [
      event({ profileId: "b", sessionId: "shared", timeStamp: "2026-11-21T10:00:02Z" }),
      event({ profileId: "a", sessionId: "shared", timeStamp: "2026-11-21T10:00:01Z" }),
      event({ profileId: "c", sessionId: "shared", timeStamp: "2026-11-21T10:00:01Z" }),
    ];
    // The first scope takes the visits-only statement, the second the general path.
    await engine.applyEvents(batch(events(), "server", "one.myshopify.com"));
    await engine.applyEvents(
      batch(
        [...events(), update("z", { update: { "properties.k": 1 } })],
        "server",
        "two.myshopify.com",
      ),
    );
    for (const scope of ["one.myshopify.com", "two.myshopify.com"]) {
      // The session belongs to the profile of its earliest event (batch order breaks the tie).
      const [session] = await sql`
        select profile_id, event_count from sessions where scope = ${scope} and item_id = 'shared'`;
      assert.deepEqual({ ...session }, { profile_id: "a", event_count: 3 }, scope);
      const visits = await sql`
        select item_id, nb_of_visits from profiles where scope = ${scope} and item_id <> 'z'
        order by item_id`;
      assert.deepEqual(
        visits.map((r) => `${r.item_id}:${r.nb_of_visits}`),
        ["a:1", "b:0", "c:0"],
        scope,
      );
    }
  });
});

// --- values the database refuses (a second line behind the edge's checks) ---

/** The error of a failed result (fails the test on a success). */
function errorOf(result: { ok: boolean; error?: string } | undefined): string {
  assert.ok(result && !result.ok, JSON.stringify(result));
  return result.error!;
}

Deno.test("engine: events the database refuses fail alone with its message; the others apply", async () => {
  await withEngine(async (engine, sql) => {
    const events = [
      event({ profileId: "a", sessionId: "s1", timeStamp: "2026-11-21T10:00:00Z" }),
      event({ profileId: "a", properties: { name: "x\u0000y" } }),
      event({ profileId: "b", properties: { ["k\u0000"]: 1 } }),
      event({ profileId: "b", sessionId: "s2", timeStamp: "2026-11-21T10:00:01Z" }),
      event({ profileId: "c", properties: { s: "\ud800" } }),
      event({ profileId: "d", timeStamp: "0000-01-01T00:00:00Z" }),
      event({ profileId: "d", timeStamp: "9999-12-31T23:30:00-01:00" }),
      event({ profileId: "d", timeStamp: "not a time" }),
      update("a", { update: { "properties.email": "a@example.com" } }),
      update("b", { update: { "properties.bad": "\u0000" } }),
      event({ profileId: "e\u0000" }),
      event({ profileId: "f", target: { itemId: "\udc00", itemType: "product" } }),
    ];
    const results = await engine.applyEvents(batch(events));
    assert.deepEqual(results.map((r) => r.ok), [
      true,
      false,
      false,
      true,
      false,
      false,
      false,
      false,
      true,
      false,
      false,
      false,
    ]);
    const nul =
      /^unsupported Unicode escape sequence: \\u0000 cannot be converted to text\. \(SQLSTATE 22P05\)$/;
    const lone =
      /^invalid input syntax for type json: Unicode low surrogate must follow a high surrogate\. \(SQLSTATE 22P02\)$/;
    for (const i of [1, 2, 9, 10]) assert.match(errorOf(results[i]), nul, `${i}`);
    for (const i of [4, 11]) assert.match(errorOf(results[i]), lone, `${i}`);
    assert.equal(
      errorOf(results[5]),
      'date/time field value out of range: "0000-01-01T00:00:00.000Z" (SQLSTATE 22008)',
    );
    assert.match(errorOf(results[6]), /\+010000-01-01T00:30:00\.000Z.*\(SQLSTATE 22009\)$/);
    assert.equal(errorOf(results[7]), 'timeStamp "not a time" is not a date-time');
    for (const i of [1, 2, 4, 5, 6, 7, 9, 10, 11]) assert.equal(results[i]!.status, 400);
    assert.deepEqual(results[8], {
      ok: true,
      status: 200,
      result: { updated: 1, processedItems: 1 },
    });

    const stored = await sql`select id from events where scope = ${SCOPE} order by id`;
    assert.deepEqual(stored.map((r) => r.id), [events[0]!.id, events[3]!.id, events[8]!.id]);
    assert.equal((await profile(sql, "a"))!.properties.email, "a@example.com");
    assert.deepEqual((await profile(sql, "b"))!.properties, { shopDomain: SCOPE });
    assert.equal(await profile(sql, "c"), undefined);
    assert.equal(await profile(sql, "d"), undefined);

    // Redelivered: the same refusals, nothing stored or counted twice.
    const visits = async () =>
      (await sql`select item_id, nb_of_visits from profiles where scope = ${SCOPE} order by 1`)
        .map((r) => `${r.item_id}:${r.nb_of_visits}`);
    const before = await visits();
    const again = await engine.applyEvents(batch(structuredClone(events)));
    assert.deepEqual(again.map((r) => r.ok), results.map((r) => r.ok));
    assert.deepEqual(again.filter((r) => r.ok).map((r) => r.ok && r.result.processedItems), [
      0,
      0,
      0,
    ]);
    assert.equal(await count(sql, "events"), 3);
    assert.deepEqual(await visits(), before);
  });
});

Deno.test("engine: a batch of one refused event is a 400 result, not an error", async () => {
  await withEngine(async (engine, sql) => {
    const results = await engine.applyEvents(
      batch([event({ profileId: "p", properties: { v: "\u0000" } })]),
    );
    assert.equal(results.length, 1);
    assert.equal(results[0]!.status, 400);
    assert.match(errorOf(results[0]), /SQLSTATE 22P05/);
    assert.equal(await count(sql, "events"), 0);
  });
});

Deno.test("engine: a constraint the edge does not know (check violation) refuses only its events", async () => {
  await withEngine(async (engine, sql) => {
    await sql`alter table events add constraint no_poison check (profile_id <> 'poison')`;
    const events = [
      event({ profileId: "p1" }),
      event({ profileId: "poison" }),
      event({ profileId: "p2" }),
      update("poison", { update: { "properties.k": 1 } }),
      update("p3", { update: { "properties.k": 1 } }),
    ];
    const results = await engine.applyEvents(batch(events));
    assert.deepEqual(results.map((r) => r.status), [200, 400, 200, 400, 200]);
    assert.match(errorOf(results[1]), /violates check constraint "no_poison".*\(SQLSTATE 23514\)$/);
    assert.equal(await count(sql, "events"), 3);
    assert.equal((await profile(sql, "p3"))!.properties.k, 1);
  });
});

Deno.test("engine: isolating refused events stays under the deadline; a timeout still throws and stores nothing", async () => {
  await withEngine(async (engine, sql) => {
    await sql`
      create function slow_insert() returns trigger language plpgsql as $$
      begin perform pg_sleep(0.3); return new; end $$`;
    await sql`create trigger slow before insert on events for each row execute function slow_insert()`;
    // The first attempt fails at once on the NUL; the parts then run into the statement timeout.
    await assert.rejects(
      engine.applyEvents(
        batch([
          event({ profileId: "p1" }),
          event({ profileId: "p2", properties: { v: "\u0000" } }),
        ]),
        { deadline: Date.now() + 150 },
      ),
      (err: unknown) => databaseFailure(err) !== "data",
    );
    assert.equal(await count(sql, "events"), 0);
    assert.equal(await count(sql, "profiles"), 0);
  });
});

Deno.test("dataErrorMessage: the database's message with its detail and SQLSTATE, bounded", () => {
  assert.equal(
    dataErrorMessage({ message: "m", detail: "d", code: "22P05" }),
    "m: d (SQLSTATE 22P05)",
  );
  assert.equal(dataErrorMessage({ message: "x".repeat(600), code: "22P05" }).length, 500);
});

Deno.test("engine: a group of batches applies as the batches one after the other, results per batch", async () => {
  const db = await freshDatabase();
  const clock = testClock();
  try {
    const { sql } = db;
    const first = batch([
      event({ profileId: "g1", sessionId: "s1" }),
      update("g1", {
        update: { "properties.email": "g1@example.com" },
      }),
    ]);
    const repeated = first.events[0]!;
    const second = {
      ...batch([
        event({ profileId: "g1", sessionId: "s2" }),
        repeated,
        event({ profileId: "g2", eventType: "not_registered" }),
      ]),
      receivedAt: "2026-11-21T12:00:05.000Z",
    };
    const results = await applyEventBatches(sql, [first, second], { now: clock.now });
    assert.equal(results.length, 2);
    assert.deepEqual(results[0]!.map((r) => r.ok && r.result), [
      { updated: 0, processedItems: 1 },
      { updated: 1, processedItems: 1 },
    ]);
    // The id given twice is stored once: the copy reads as an event already stored.
    assert.deepEqual(results[1]![0], {
      ok: true,
      status: 200,
      result: { updated: 0, processedItems: 1 },
    });
    assert.deepEqual(results[1]![1], {
      ok: true,
      status: 200,
      result: { updated: 0, processedItems: 0 },
    });
    assert.equal(results[1]![2]!.ok, false);
    assert.equal(await count(sql, "events"), 3);
    const row = await profile(sql, "g1");
    assert.equal(row!.properties.email, "g1@example.com");
    // Sessions s1 and s2, and the update's default session.
    assert.equal(row!.nb_of_visits, 3);
    // Each event keeps the time its own batch was received.
    const received = await sql<{ id: string; received_at: Date }[]>`
      select id, received_at from events where scope = ${SCOPE}`;
    const at = new Map(received.map((r) => [r.id, r.received_at.toISOString()]));
    assert.equal(at.get(first.events[0]!.id), first.receivedAt);
    assert.equal(at.get(second.events[0]!.id), second.receivedAt);
    // Applied again, the group changes nothing.
    const again = await applyEventBatches(sql, [first, second], { now: clock.now });
    assert.ok(again.flat().every((r) => !r.ok || r.result.processedItems === 0));
    assert.equal((await profile(sql, "g1"))!.nb_of_visits, 3);
  } finally {
    await db.close();
  }
});

Deno.test("engine: in a group, an event the database refuses fails alone; the other batches apply", async () => {
  await withEngine(async (_engine, sql, clock) => {
    const bad = event({ profileId: "r1", timeStamp: "0000-01-01T00:00:00Z" });
    const results = await applyEventBatches(sql, [
      batch([event({ profileId: "r1" }), event({ profileId: "r2" })]),
      batch([bad, event({ profileId: "r3" })]),
    ], { now: clock.now });
    assert.deepEqual(results.map((rs) => rs.map((r) => r.ok)), [[true, true], [false, true]]);
    assert.equal(await count(sql, "events"), 3);
  });
});

Deno.test("engine: a group's batches must share their scope and source", async () => {
  await withEngine(async (_engine, sql, clock) => {
    await assert.rejects(
      applyEventBatches(sql, [
        batch([event({ profileId: "a" })]),
        batch([event({ profileId: "b" })], "pixel"),
      ], { now: clock.now }),
    );
    assert.equal(await count(sql, "events"), 0);
  });
});

Deno.test("engine: a pixel event never writes a server or merged profile, nor an absorbed id (403, nothing stored)", async () => {
  await withEngine(async (engine, sql) => {
    // A server profile, a merged one (pixel, then named by a server event) and an absorbed id.
    await engine.applyEvents(batch([
      event({ profileId: "cust_1", sessionId: "srv1", timeStamp: "2026-11-20T10:00:00Z" }),
    ]));
    await engine.applyEvents(batch([event({ profileId: "anon_m" })], "pixel"));
    await engine.applyEvents(batch([event({ profileId: "anon_m", sessionId: "srv2" })]));
    await engine.applyEvents(batch([event({ profileId: "anon_9" })], "pixel"));
    await engine.applyEvents(batch([
      event({ profileId: "store_acme_9", target: { itemId: "anon_9", itemType: "profile" } }),
    ]));
    const before = await sql`select * from profiles order by item_id`;
    const eventsBefore = await count(sql, "events");

    // The finding's reproduction: a visit in a new session, time-stamped 2099.
    const results = await engine.applyEvents(batch([
      event({ profileId: "cust_1", sessionId: "px1", timeStamp: "2099-01-01T00:00:00Z" }),
      event({ profileId: "anon_m", sessionId: "px2" }),
      event({ profileId: "anon_9", sessionId: "px3" }),
      event({ profileId: "store_acme_9", sessionId: "px4" }),
      event({ profileId: "anon_ok", sessionId: "px5" }),
    ], "pixel"));
    assert.deepEqual(results.map((r) => r.status), [403, 403, 403, 403, 200]);
    assert.deepEqual(results[0], { ok: false, status: 403, error: PIXEL_NOT_ANONYMOUS });
    // Nothing of the refused events is stored: no event, no session, no visit, no lastVisit.
    assert.equal(await count(sql, "events"), eventsBefore + 1);
    const [pixelEvents] = await sql`
      select count(*)::int as n from events where source = 'pixel' and profile_id <> 'anon_ok'
        and session_id like 'px%'`;
    assert.equal(pixelEvents!.n, 0);
    assert.deepEqual(
      [...await sql`select * from profiles where item_id <> 'anon_ok' order by item_id`],
      [...before],
    );
    assert.equal((await profile(sql, "anon_ok"))!.provenance, "pixel");
    // Redelivered, the same answer: refused events were never stored.
    const again = await engine.applyEvents(batch([
      event({ profileId: "cust_1", sessionId: "px1" }),
    ], "pixel"));
    assert.equal(again[0]!.status, 403);
  });
});

Deno.test("engine: a pixel group refuses identified profiles per event, also when another event fails alone", async () => {
  await withEngine(async (engine, sql, clock) => {
    await engine.applyEvents(batch([event({ profileId: "cust_1" })]));
    const results = await applyEventBatches(sql, [
      batch([
        event({ profileId: "anon_a", sessionId: "s1" }),
        event({ profileId: "cust_1", sessionId: "s2" }),
      ], "pixel"),
      batch([
        event({ profileId: "anon_b", properties: { bad: "x\u0000" } }),
        event({ profileId: "anon_c", sessionId: "s3" }),
        event({ profileId: "cust_1", sessionId: "s4" }),
      ], "pixel"),
    ], { now: clock.now });
    assert.deepEqual(results.map((b) => b.map((r) => r.status)), [[200, 403], [400, 200, 403]]);
    const [row] = await sql`select count(*)::int as n from events where profile_id = 'cust_1'`;
    assert.equal(row!.n, 1);
    assert.equal((await profile(sql, "cust_1"))!.nb_of_visits, 1);
    assert.equal((await profile(sql, "anon_c"))!.nb_of_visits, 1);
  });
});

Deno.test("engine: a pixel and a server batch racing for a new id never leave pixel events on a server profile", async () => {
  await withEngine(async (engine, sql) => {
    const ids = Array.from({ length: 12 }, (_, i) => `race_${i}`);
    await Promise.all(ids.flatMap((id) => [
      engine.applyEvents(batch([event({ profileId: id, sessionId: `px_${id}` })], "pixel")),
      engine.applyEvents(batch([event({ profileId: id, sessionId: `srv_${id}` })])),
    ]));
    // Whichever came first: pixel first, the server event makes it merged (both stored); server
    // first, the pixel event is refused.
    const rows = await sql`
      select p.item_id, p.provenance, p.nb_of_visits,
             (select count(*)::int from events e
              where e.scope = p.scope and e.profile_id = p.item_id and e.source = 'pixel') as pixel
      from profiles p order by p.item_id`;
    assert.equal(rows.length, ids.length);
    for (const row of rows) {
      if (row.provenance === "server") assert.deepEqual([row.pixel, row.nb_of_visits], [0, 1]);
      else assert.deepEqual([row.provenance, row.pixel, row.nb_of_visits], ["merged", 1, 2]);
    }
  });
});

Deno.test("engine: a pixel event's own time is clamped to [received - 72 h, received + 5 min]", async () => {
  await withEngine(async (engine, sql) => {
    // Received 2026-11-21T12:00:00Z (the batch's receivedAt).
    const results = await engine.applyEvents(batch([
      event({ profileId: "anon_f", sessionId: "f", timeStamp: "2099-01-01T00:00:00Z" }),
      event({ profileId: "anon_p", sessionId: "p", timeStamp: "2000-01-01T00:00:00+01:00" }),
      event({ profileId: "anon_k", sessionId: "k", timeStamp: "2026-11-19T08:30:00.250Z" }),
      event({ profileId: "anon_e", sessionId: "e", timeStamp: "2026-11-21T12:05:00Z" }),
    ], "pixel"));
    assert.ok(results.every((r) => r.ok));
    const times = await sql`select profile_id, time_stamp from events order by profile_id`;
    assert.deepEqual(
      times.map((r) => [r.profile_id, (r.time_stamp as Date).toISOString()]),
      [
        ["anon_e", "2026-11-21T12:05:00.000Z"],
        ["anon_f", "2026-11-21T12:05:00.000Z"],
        ["anon_k", "2026-11-19T08:30:00.250Z"],
        ["anon_p", "2026-11-18T12:00:00.000Z"],
      ],
    );
    const visit = (await profile(sql, "anon_f"))!;
    assert.equal((visit.last_visit as Date).toISOString(), "2026-11-21T12:05:00.000Z");
    // A sessionless event's session follows the clamped time.
    await engine.applyEvents(batch([
      event({ profileId: "anon_d", timeStamp: "2099-01-01T00:00:00Z" }),
    ], "pixel"));
    const [day] = await sql`select session_id from events where profile_id = 'anon_d'`;
    assert.equal(day!.session_id, "anon_d:2026-11-21T12:05:00.000Z");
    // Server events are the brand's own: stored at their time.
    await engine.applyEvents(batch([
      event({ profileId: "cust_t", timeStamp: "2099-01-01T00:00:00Z" }),
    ]));
    const [server] = await sql`select time_stamp from events where profile_id = 'cust_t'`;
    assert.equal((server!.time_stamp as Date).toISOString(), "2099-01-01T00:00:00.000Z");
  });
});

Deno.test("clampPixelTime: inside the window as sent (in UTC), outside at its nearest end", () => {
  const received = "2026-11-21T12:00:00.000Z";
  assert.equal(clampPixelTime("2026-11-21T13:00:00+01:00", received), received);
  assert.equal(clampPixelTime("2026-11-21T12:05:00.001Z", received), "2026-11-21T12:05:00.000Z");
  assert.equal(clampPixelTime("2026-11-18T11:59:59.999Z", received), "2026-11-18T12:00:00.000Z");
  assert.equal(clampPixelTime("2026-11-18T12:00:00Z", received), "2026-11-18T12:00:00.000Z");
  assert.equal(clampPixelTime("9999-12-31T23:59:59Z", received), "2026-11-21T12:05:00.000Z");
  assert.equal(clampPixelTime("0001-01-01T00:00:00Z", received), "2026-11-18T12:00:00.000Z");
});
