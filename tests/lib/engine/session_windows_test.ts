import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  assignSessions,
  generatedSessionId,
  type SessionlessEvent,
} from "../../../lib/engine/session_windows.ts";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import type { Engine, EventBatch, IngestEvent } from "../../../lib/engine/engine.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { freshDatabase, testClock } from "../../test_support.ts";

const SCOPE = "acme.myshopify.com";
const newId = monotonicFactory();
const T0 = Date.parse("2026-11-20T10:00:00Z");
const MIN = 60_000;

function at(minutes: number, key: number, profileId = "p"): SessionlessEvent {
  return { key, profileId, time: T0 + minutes * MIN };
}

Deno.test("session windows: runs with gaps under 30 minutes, whatever the order given", () => {
  const events = [at(0, 0), at(29, 1), at(58.99, 2), at(88.99, 3), at(5, 4, "q")];
  const expected = new Map([
    [0, generatedSessionId("p", T0)],
    [1, generatedSessionId("p", T0)],
    [2, generatedSessionId("p", T0)],
    // Exactly 30 minutes after the last: a new session.
    [3, generatedSessionId("p", T0 + 88.99 * MIN)],
    [4, generatedSessionId("q", T0 + 5 * MIN)],
  ]);
  assert.deepEqual(assignSessions(events, []), expected);
  assert.deepEqual(assignSessions([...events].reverse(), []), expected);
  assert.equal(generatedSessionId("p", T0), "p:2026-11-20T10:00:00.000Z");
});

Deno.test("session windows: a late run joins the nearest known session within the gap, never merges two", () => {
  const known = [
    { itemId: "p:a", profileId: "p", first: T0, last: T0 + 10 * MIN },
    { itemId: "p:b", profileId: "p", first: T0 + 60 * MIN, last: T0 + 70 * MIN },
    { itemId: "q:a", profileId: "q", first: T0, last: T0 + 10 * MIN },
  ];
  const assigned = assignSessions(
    [
      at(-20, 0), // before p:a, within the gap: stretches it backwards
      at(35, 1), // 25 min after p:a, 25 before p:b: the tie goes to the earlier
      at(200, 2), // far from both: its own
    ],
    known,
  );
  assert.deepEqual([...assigned.values()], [
    "p:a",
    "p:a",
    generatedSessionId("p", T0 + 200 * MIN),
  ]);
  // Nearer p:b: it joins p:b. With 35 in the same batch, 35 and 50 are one run, which joins the
  // session nearest to the run (p:b, 10 minutes from 50).
  assert.deepEqual([...assignSessions([at(50, 0)], known).values()], ["p:b"]);
  assert.deepEqual([...assignSessions([at(35, 0), at(50, 1)], known).values()], ["p:b", "p:b"]);
  // Another profile's session is never joined.
  assert.deepEqual([...assignSessions([at(5, 0, "r")], known).values()], [
    generatedSessionId("r", T0 + 5 * MIN),
  ]);
});

function event(fields: Partial<IngestEvent> & { profileId: string }): IngestEvent {
  return { id: newId(), eventType: "page_viewed", ...fields };
}

function batch(events: IngestEvent[], source: "server" | "pixel" = "server"): EventBatch {
  return { scope: SCOPE, source, receivedAt: "2026-11-21T12:00:00.000Z", events };
}

async function withEngine(fn: (engine: Engine, sql: Sql) => Promise<void>) {
  const db = await freshDatabase();
  try {
    await fn(createEmbeddedEngine({ sql: db.sql, now: testClock().now }), db.sql);
  } finally {
    await db.close();
  }
}

async function sessions(sql: Sql) {
  return (await sql<
    { item_id: string; event_count: number; properties: Record<string, unknown> }[]
  >`
    select item_id, event_count, properties from sessions where scope = ${SCOPE}
    order by item_id`).map((r) => ({ ...r }));
}

const IPHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 " +
  "(KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1";

const context = (referrer: string, userAgent = IPHONE) => ({
  context: { page: { url: "https://acme.example/?utm_source=news", referrer }, userAgent },
});

Deno.test("sessions: out of order within a batch, redelivered, or split over batches: the same sessions", async () => {
  const times = ["10:00", "10:20", "10:45", "11:30", "11:40"].map((t) => `2026-11-20T${t}:00Z`);
  const inOrder = times.map((timeStamp) => event({ profileId: "p", timeStamp }));
  await withEngine(async (engine, sql) => {
    const shuffled = [inOrder[3]!, inOrder[0]!, inOrder[4]!, inOrder[2]!, inOrder[1]!];
    await engine.applyEvents(batch(shuffled));
    const once = await sessions(sql);
    assert.deepEqual(once.map((s) => [s.item_id, s.event_count]), [
      ["p:2026-11-20T10:00:00.000Z", 3],
      ["p:2026-11-20T11:30:00.000Z", 2],
    ]);
    // Redelivered (the same ids): nothing changes, no visit is counted twice.
    await engine.applyEvents(batch(structuredClone(shuffled)));
    assert.deepEqual(await sessions(sql), once);
    const [profile] = await sql`select nb_of_visits from profiles where item_id = 'p'`;
    assert.equal(profile!.nb_of_visits, 2);
  });
  await withEngine(async (engine, sql) => {
    // The same events, the latest first, one batch each.
    for (const e of [...inOrder].reverse()) await engine.applyEvents(batch([e]));
    assert.deepEqual((await sessions(sql)).map((s) => s.event_count), [3, 2]);
    // Late: 10:45's batch came before 10:20's, so 10:45 began its own session that 10:20 and
    // 10:00 then joined; its id names the event that started it.
    assert.deepEqual((await sessions(sql)).map((s) => s.item_id), [
      "p:2026-11-20T10:45:00.000Z",
      "p:2026-11-20T11:40:00.000Z",
    ]);
  });
});

Deno.test("sessions: the properties come from the earliest event with a context, even when it arrives last", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([
      event({ profileId: "p", timeStamp: "2026-11-20T10:00:00Z" }),
      event({
        profileId: "p",
        timeStamp: "2026-11-20T10:10:00Z",
        properties: context("https://later.example/"),
      }),
    ]));
    assert.equal((await sessions(sql))[0]!.properties.referringURL, "https://later.example/");
    // An earlier event of the session with a context, delivered late, through the update path.
    await engine.applyEvents(batch([
      event({
        profileId: "p",
        timeStamp: "2026-11-20T10:05:00Z",
        properties: context("https://www.google.com/"),
      }),
      event({
        profileId: "p",
        eventType: "updateProperties",
        timeStamp: "2026-11-20T10:20:00Z",
        properties: { update: { "properties.email": "p@example.com" } },
      }),
    ]));
    // A later one never replaces them.
    await engine.applyEvents(batch([
      event({
        profileId: "p",
        timeStamp: "2026-11-20T10:30:00Z",
        properties: context("https://bing.com/"),
      }),
    ]));
    const [session, ...others] = await sessions(sql);
    assert.equal(others.length, 0);
    assert.equal(session!.event_count, 5);
    assert.deepEqual(session!.properties, {
      landingPageURL: "https://acme.example/?utm_source=news",
      landingPagePath: "/",
      referringURL: "https://www.google.com/",
      utmSource: "news",
      userAgentName: "Safari",
      userAgentVersion: "17.6",
      userAgentNameAndVersion: "Safari@@17.6",
      operatingSystemName: "iOS",
      deviceCategory: "mobile",
    });
  });
});

Deno.test("sessions: concurrent batches of one profile take turns and share one session", async () => {
  await withEngine(async (engine, sql) => {
    await Promise.all(Array.from({ length: 8 }, (_, i) =>
      engine.applyEvents(batch([
        event({ profileId: "hot", timeStamp: `2026-11-20T10:0${i}:00Z` }),
        ...(i % 2 ? [] : [event({ profileId: "anon_hot", timeStamp: "2026-11-20T10:00:00Z" })]),
      ]))));
    // One session each; its id names the first event of whichever batch went first.
    const all = await sessions(sql);
    assert.deepEqual(all.map((s) => [s.item_id.split(":")[0], s.event_count]), [
      ["anon_hot", 4],
      ["hot", 8],
    ]);
    const [hot] = await sql`select nb_of_visits from profiles where item_id = 'hot'`;
    assert.equal(hot!.nb_of_visits, 1);
  });
});

Deno.test("sessions: after a merge, the user's events continue the anonymous session", async () => {
  await withEngine(async (engine, sql) => {
    await engine.applyEvents(batch([
      event({ profileId: "anon_1", timeStamp: "2026-11-20T10:00:00Z", properties: context("r") }),
    ], "pixel"));
    // The server links anon_1 to the user (a merge target), then the user browses on.
    await engine.applyEvents(batch([
      event({
        profileId: "user_1",
        timeStamp: "2026-11-20T10:05:00Z",
        target: { itemId: "anon_1", itemType: "profile" },
      }),
    ]));
    await engine.applyEvents(batch([
      event({ profileId: "user_1", timeStamp: "2026-11-20T10:15:00Z" }),
    ]));
    const all = await sessions(sql);
    // The merging event started the user's own session (its profile was not merged yet); the
    // next event joins the nearest of the user's sessions, now the anonymous one among them.
    assert.deepEqual(all.map((s) => [s.item_id, s.event_count]), [
      ["anon_1:2026-11-20T10:00:00.000Z", 1],
      ["user_1:2026-11-20T10:05:00.000Z", 2],
    ]);
    const owners = await sql`select distinct profile_id from sessions where scope = ${SCOPE}`;
    assert.deepEqual(owners.map((r) => r.profile_id), ["user_1"]);
  });
});
