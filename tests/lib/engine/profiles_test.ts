import assert from "node:assert/strict";
import type { Sql } from "../../../lib/store/db.ts";
import {
  type EventListQuery,
  findProfile,
  identifiedProfileIds,
  identityOf,
  listProfileEvents,
  listProfiles,
  profileIds,
  type ProfileListQuery,
} from "../../../lib/engine/profiles.ts";
import { OFFSET_WINDOW, pageEnvelope } from "../../../lib/http/pagination.ts";
import { freshDatabase } from "../../test_support.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";

type Provenance = "server" | "pixel" | "merged";

// [scope, id, provenance, properties, firstVisit, lastVisit, nbOfVisits]
// deno-fmt-ignore
const PROFILES: [string, string, Provenance, Record<string, unknown>, string?, string?, number?][] =
  [
    [A, "c1", "server", { email: "Ann@Example.com", firstName: "Ann", city: "Paris" }, "2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z", 3],
    [A, "c2", "server", { email: "bob_smith@example.com", lastName: "Smith" }, "2026-02-01T00:00:00Z", "2026-02-15T00:00:00Z", 5],
    [A, "c3", "server", { phoneNumber: "+15550100", shopifyCustomerId: "7001" }],
    // Would match "b_s" and "100%" if the search were a LIKE pattern.
    [A, "c4", "server", { email: "bxsmith@example.com" }, "2026-01-15T00:00:00Z", "2026-04-01T00:00:00Z", 1],
    [A, "c5", "server", { firstName: "100% Cotton", lastName: "1000" }, "2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z", 5],
    [A, "anon1", "pixel", {}],
    [A, "anon2", "pixel", { email: "ann@anon.example" }],
    [A, "m1", "merged", { email: "ann@merged.example" }],
    [B, "c1", "server", { email: "ann@b.example" }],
    [B, "anonB", "pixel", {}],
  ];

// [scope, id, profileId, eventType, timeStamp]; old1 is an id c1 absorbed in scope A only.
const EVENTS: [string, string, string, string, string][] = [
  [A, "ev01", "c1", "page_viewed", "2026-01-01T10:00:00Z"],
  [A, "ev02", "c1", "order_created", "2026-01-02T10:00:00Z"],
  [A, "ev03", "old1", "page_viewed", "2026-01-03T10:00:00Z"],
  [A, "ev04", "old1", "order_created", "2025-12-31T23:00:00Z"],
  [A, "ev05", "c2", "page_viewed", "2026-01-05T10:00:00Z"],
  // Same ids and profile ids in another scope: never A's.
  [B, "ev01", "c1", "page_viewed", "2026-01-01T10:00:00Z"],
  [B, "bx1", "c1", "order_created", "2026-01-04T10:00:00Z"],
  [B, "bx2", "old1", "page_viewed", "2026-01-04T11:00:00Z"],
];

async function insertProfile(
  sql: Sql,
  [scope, id, provenance, properties, firstVisit, lastVisit, visits]: (typeof PROFILES)[number],
): Promise<void> {
  // The engine stamps every profile with its scope; direct inserts do the same.
  await sql`
    insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                          nb_of_visits, created_at, updated_at)
    values (${scope}, ${id}, ${sql.json({ ...properties, shopDomain: scope } as never)},
            ${provenance}, ${firstVisit ?? null}::timestamptz, ${lastVisit ?? null}::timestamptz,
            ${visits ?? 0}, now(), now())`;
}

async function seed(sql: Sql): Promise<void> {
  for (const row of PROFILES) await insertProfile(sql, row);
  for (const [scope, id, profileId, type, time] of EVENTS) {
    await sql`
      insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                          flattened_properties, target, source, received_at)
      values (${scope}, ${id}, ${profileId}, ${`s-${profileId}`}, ${type}, ${time},
              ${sql.json({ n: id } as never)}, ${sql.json({ "n": id } as never)},
              ${sql.json({ itemId: "page", itemType: "page" } as never)}, 'pixel', now())`;
  }
  await sql`
    insert into profile_aliases (scope, alias_id, profile_id, merged_at)
    values (${A}, 'old1', 'c1', now())`;
}

async function withSeeded(fn: (sql: Sql) => Promise<void>): Promise<void> {
  const db = await freshDatabase();
  try {
    await seed(db.sql);
    await fn(db.sql);
  } finally {
    await db.close();
  }
}

function profileQuery(query: Partial<ProfileListQuery> = {}): ProfileListQuery {
  return { bucket: "customers", sort: "itemId.keyword:asc", limit: 100, offset: 0, ...query };
}

function eventQuery(query: Partial<EventListQuery> = {}): EventListQuery {
  return { sort: "itemId.keyword:asc", limit: 100, offset: 0, ...query };
}

async function ids(sql: Sql, scope: string, query: Partial<ProfileListQuery>): Promise<string[]> {
  return (await listProfiles(sql, scope, profileQuery(query))).list.map((p) => p.itemId);
}

async function eventIds(
  sql: Sql,
  scope: string,
  profiles: string[],
  query: Partial<EventListQuery> = {},
): Promise<string[]> {
  return (await listProfileEvents(sql, scope, profiles, eventQuery(query))).list.map((e) =>
    e.itemId
  );
}

// ---------------------------------------------------------------------------------------------
// listProfiles

Deno.test("listProfiles: each bucket lists its provenance only, in the scope only", async () => {
  await withSeeded(async (sql) => {
    const buckets = [
      ["customers", "server", ["c1", "c2", "c3", "c4", "c5"]],
      ["anonymous", "pixel", ["anon1", "anon2"]],
      ["merged", "merged", ["m1"]],
    ] as const;
    for (const [bucket, provenance, expected] of buckets) {
      const page = await listProfiles(sql, A, profileQuery({ bucket }));
      assert.deepEqual(page.list.map((p) => p.itemId), expected, bucket);
      assert.deepEqual(new Set(page.list.map((p) => p.provenance)), new Set([provenance]));
      assert.equal(page.total, expected.length);
      assert.equal(page.more, false);
    }
    assert.deepEqual(await ids(sql, B, { bucket: "customers" }), ["c1"]);
    assert.deepEqual(await ids(sql, B, { bucket: "anonymous" }), ["anonB"]);
    assert.deepEqual(await ids(sql, B, { bucket: "merged" }), []);
    assert.deepEqual(await ids(sql, "empty.myshopify.com", {}), []);
  });
});

Deno.test("listProfiles: a profile's view carries its visit columns as properties", async () => {
  await withSeeded(async (sql) => {
    const page = await listProfiles(sql, A, profileQuery({ limit: 1 }));
    assert.deepEqual(page.list, [{
      itemId: "c1",
      properties: {
        email: "Ann@Example.com",
        firstName: "Ann",
        city: "Paris",
        shopDomain: A,
        firstVisit: "2026-01-01T00:00:00.000Z",
        lastVisit: "2026-03-01T00:00:00.000Z",
        nbOfVisits: 3,
      },
      provenance: "server",
    }]);
    // Null visit dates are left out, the count never is.
    const [c3] = (await listProfiles(sql, A, profileQuery({ after: "c2", limit: 1 }))).list;
    assert.deepEqual(c3!.properties, {
      phoneNumber: "+15550100",
      shopifyCustomerId: "7001",
      shopDomain: A,
      nbOfVisits: 0,
    });
    // The other scope's c1 is its own profile.
    assert.equal(
      (await listProfiles(sql, B, profileQuery())).list[0]!.properties.email,
      "ann@b.example",
    );
  });
});

Deno.test("listProfiles: q is a case-insensitive substring of the id and identity fields", async () => {
  await withSeeded(async (sql) => {
    const search = async (q: string, bucket: ProfileListQuery["bucket"] = "customers") => {
      const page = await listProfiles(sql, A, profileQuery({ q, bucket }));
      // The total counts what the search matched, not the bucket.
      assert.equal(page.total, page.list.length, q);
      return page.list.map((p) => p.itemId);
    };
    assert.deepEqual(await search("ANN"), ["c1"]);
    assert.deepEqual(await search("ann", "anonymous"), ["anon2"]);
    assert.deepEqual(await search("ann", "merged"), ["m1"]);
    assert.deepEqual(await search("SMITH"), ["c2", "c4"]);
    assert.deepEqual(await search("C3"), ["c3"]);
    assert.deepEqual(await search("5550100"), ["c3"]);
    assert.deepEqual(await search("7001"), ["c3"]);
    assert.deepEqual(await search("cotton"), ["c5"]);
    assert.deepEqual(await search("c"), ["c1", "c2", "c3", "c4", "c5"]);
    // city is not searched.
    assert.deepEqual(await search("paris"), []);
    // An empty q is no filter.
    assert.deepEqual(await search(""), ["c1", "c2", "c3", "c4", "c5"]);
  });
});

Deno.test("listProfiles: % and _ in q are plain characters, not LIKE wildcards", async () => {
  await withSeeded(async (sql) => {
    assert.deepEqual(await ids(sql, A, { q: "b_s" }), ["c2"]);
    assert.deepEqual(await ids(sql, A, { q: "_" }), ["c2"]);
    assert.deepEqual(await ids(sql, A, { q: "100%" }), ["c5"]);
    assert.deepEqual(await ids(sql, A, { q: "%" }), ["c5"]);
    assert.deepEqual(await ids(sql, A, { q: "b%s" }), []);
  });
});

Deno.test("listProfiles: every sort, nulls last, ties by id", async () => {
  await withSeeded(async (sql) => {
    const sorts: [ProfileListQuery["sort"], string[]][] = [
      ["itemId.keyword:asc", ["c1", "c2", "c3", "c4", "c5"]],
      ["itemId.keyword:desc", ["c5", "c4", "c3", "c2", "c1"]],
      ["properties.lastVisit:desc", ["c4", "c1", "c5", "c2", "c3"]],
      ["properties.lastVisit:asc", ["c2", "c1", "c5", "c4", "c3"]],
      ["properties.firstVisit:desc", ["c5", "c2", "c4", "c1", "c3"]],
      ["properties.firstVisit:asc", ["c1", "c4", "c2", "c5", "c3"]],
      ["properties.nbOfVisits:desc", ["c2", "c5", "c1", "c4", "c3"]],
      ["properties.nbOfVisits:asc", ["c3", "c4", "c1", "c2", "c5"]],
    ];
    for (const [sort, expected] of sorts) {
      assert.deepEqual(await ids(sql, A, { sort }), expected, sort);
    }
  });
});

Deno.test("listProfiles: offset pages, more, and a total independent of the page", async () => {
  await withSeeded(async (sql) => {
    const page = (query: Partial<ProfileListQuery>) => listProfiles(sql, A, profileQuery(query));
    const first = await page({ limit: 2 });
    assert.deepEqual(first.list.map((p) => p.itemId), ["c1", "c2"]);
    assert.deepEqual([first.total, first.more], [5, true]);
    const middle = await page({ limit: 2, offset: 2, sort: "itemId.keyword:desc" });
    assert.deepEqual(middle.list.map((p) => p.itemId), ["c3", "c2"]);
    assert.deepEqual([middle.total, middle.more], [5, true]);
    const last = await page({ limit: 2, offset: 4 });
    assert.deepEqual(last.list.map((p) => p.itemId), ["c5"]);
    assert.deepEqual([last.total, last.more], [5, false]);
    // Exactly the remaining rows: no more.
    const exact = await page({ limit: 3, offset: 2 });
    assert.deepEqual(exact.list.map((p) => p.itemId), ["c3", "c4", "c5"]);
    assert.equal(exact.more, false);
    const past = await page({ limit: 2, offset: 5 });
    assert.deepEqual([past.list, past.total, past.more], [[], 5, false]);
  });
});

Deno.test("listProfiles: keyset after lists ids after it and ignores offset", async () => {
  await withSeeded(async (sql) => {
    const page = (query: Partial<ProfileListQuery>) => listProfiles(sql, A, profileQuery(query));
    const second = await page({ after: "c2", limit: 2, offset: 3 });
    assert.deepEqual(second.list.map((p) => p.itemId), ["c3", "c4"]);
    assert.deepEqual([second.total, second.more], [5, true]);
    const last = await page({ after: "c4", limit: 2 });
    assert.deepEqual(last.list.map((p) => p.itemId), ["c5"]);
    assert.equal(last.more, false);
    // An id that is not a profile still positions the page.
    assert.deepEqual((await page({ after: "c25" })).list.map((p) => p.itemId), ["c3", "c4", "c5"]);
    assert.deepEqual((await page({ after: "c5" })).list, []);
    // Walking pages of 2 by keyset visits every profile once.
    const seen: string[] = [];
    let after: string | undefined;
    for (let more = true; more;) {
      const next = await page({ limit: 2, ...(after === undefined ? {} : { after }) });
      seen.push(...next.list.map((p) => p.itemId));
      after = next.list.at(-1)?.itemId;
      more = next.more;
    }
    assert.deepEqual(seen, ["c1", "c2", "c3", "c4", "c5"]);
  });
});

Deno.test("listProfiles: the total is counted only to one past the window; the envelope caps it", async () => {
  const db = await freshDatabase();
  try {
    const { sql } = db;
    const scope = "big.myshopify.com";
    // Two rows past the window, in one statement: cheap on both backends.
    await sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      select ${scope}, 'p' || lpad(n::text, 5, '0'), jsonb_build_object('shopDomain', ${scope}::text),
             'server', now(), now()
      from generate_series(1, ${OFFSET_WINDOW + 2}) as n`;
    await sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      values (${scope}, 'anon', '{}', 'pixel', now(), now())`;
    const capped = await listProfiles(sql, scope, profileQuery({ limit: 1 }));
    // Window + 1 says "beyond the window" without counting every row; the route's envelope
    // (pageEnvelope) shows it as the window.
    assert.equal(capped.total, OFFSET_WINDOW + 1);
    assert.equal(
      pageEnvelope({ list: capped.list, totalSize: capped.total, offset: 0, limit: 1 }).totalSize,
      OFFSET_WINDOW,
    );
    assert.deepEqual(capped.list.map((p) => p.itemId), ["p00001"]);
    assert.equal(capped.more, true);
    // Rows beyond the window are still reachable by keyset.
    const tail = await listProfiles(sql, scope, profileQuery({ after: "p10000" }));
    assert.deepEqual(tail.list.map((p) => p.itemId), ["p10001", "p10002"]);
    assert.equal(tail.total, OFFSET_WINDOW + 1);
    const anonymous = await listProfiles(sql, scope, profileQuery({ bucket: "anonymous" }));
    assert.deepEqual([anonymous.total, anonymous.list.length], [1, 1]);
    // A search narrows below the cap: an exact count again (p09990 to p09999).
    assert.equal((await listProfiles(sql, scope, profileQuery({ q: "p0999" }))).total, 10);
  } finally {
    await db.close();
  }
});

// ---------------------------------------------------------------------------------------------
// profileIds, findProfile, identityOf

Deno.test("profileIds: the profile's own id first, then the ids it absorbed in this scope", async () => {
  await withSeeded(async (sql) => {
    assert.deepEqual(await profileIds(sql, A, "c1"), ["c1", "old1"]);
    assert.deepEqual(await profileIds(sql, A, "c2"), ["c2"]);
    assert.deepEqual(await profileIds(sql, B, "c1"), ["c1"]);
    assert.deepEqual(await profileIds(sql, A, "nobody"), ["nobody"]);
  });
});

Deno.test("findProfile: by id or absorbed id, in this scope only", async () => {
  await withSeeded(async (sql) => {
    const c1 = await findProfile(sql, A, "c1");
    assert.equal(c1!.itemId, "c1");
    assert.equal(c1!.properties.email, "Ann@Example.com");
    assert.equal(c1!.properties.nbOfVisits, 3);
    assert.deepEqual(await findProfile(sql, A, "old1"), c1);
    assert.equal((await findProfile(sql, B, "c1"))!.properties.email, "ann@b.example");
    assert.equal(await findProfile(sql, B, "old1"), null);
    assert.equal(await findProfile(sql, A, "anonB"), null);
    assert.equal(await findProfile(sql, A, "nobody"), null);
    assert.equal((await findProfile(sql, A, "m1"))!.provenance, "merged");
  });
});

Deno.test("identityOf: the identity fields present and not null, nothing else", () => {
  assert.deepEqual(
    identityOf({
      email: "a@example.com",
      firstName: null,
      city: "Paris",
      shopDomain: A,
      age: 30,
      shopifyCustomerId: "7",
    }),
    { email: "a@example.com", city: "Paris", shopDomain: A, shopifyCustomerId: "7" },
  );
  assert.deepEqual(identityOf({}), {});
});

// ---------------------------------------------------------------------------------------------
// listProfileEvents

Deno.test("listProfileEvents: the given ids' events in this scope, as views", async () => {
  await withSeeded(async (sql) => {
    assert.deepEqual(await eventIds(sql, A, ["c1"]), ["ev01", "ev02"]);
    assert.deepEqual(await eventIds(sql, A, ["old1"]), ["ev03", "ev04"]);
    // A merged profile's history: its own id and its aliases.
    assert.deepEqual(await eventIds(sql, A, await profileIds(sql, A, "c1")), [
      "ev01",
      "ev02",
      "ev03",
      "ev04",
    ]);
    assert.deepEqual(await eventIds(sql, A, ["c1", "c2"]), ["ev01", "ev02", "ev05"]);
    assert.deepEqual(await eventIds(sql, B, ["c1"]), ["bx1", "ev01"]);
    assert.deepEqual(await eventIds(sql, B, ["c1", "old1"]), ["bx1", "bx2", "ev01"]);
    assert.deepEqual(await eventIds(sql, A, ["nobody"]), []);
    const page = await listProfileEvents(sql, A, ["c1", "old1"], eventQuery({ limit: 1 }));
    assert.deepEqual(page.list, [{
      itemId: "ev01",
      eventType: "page_viewed",
      profileId: "c1",
      sessionId: "s-c1",
      timeStamp: "2026-01-01T10:00:00.000Z",
      properties: { n: "ev01" },
      flattenedProperties: { n: "ev01" },
      target: { itemId: "page", itemType: "page" },
      source: "pixel",
      scope: A,
    }]);
    assert.deepEqual([page.total, page.more], [4, true]);
    // An absorbed id's event keeps the id it was sent with.
    assert.equal(
      (await listProfileEvents(sql, A, ["c1", "old1"], eventQuery({ after: "ev02", limit: 1 })))
        .list[0]!.profileId,
      "old1",
    );
  });
});

Deno.test("listProfileEvents: eventType, from and to filter rows and total (bounds inclusive)", async () => {
  await withSeeded(async (sql) => {
    const all = ["c1", "old1"];
    const filtered = async (query: Partial<EventListQuery>) => {
      const page = await listProfileEvents(sql, A, all, eventQuery(query));
      assert.equal(page.total, page.list.length, JSON.stringify(query));
      return page.list.map((e) => e.itemId);
    };
    assert.deepEqual(await filtered({ eventType: "order_created" }), ["ev02", "ev04"]);
    assert.deepEqual(await filtered({ eventType: "refund_issued" }), []);
    assert.deepEqual(await filtered({ from: new Date("2026-01-01T10:00:00Z") }), [
      "ev01",
      "ev02",
      "ev03",
    ]);
    assert.deepEqual(await filtered({ to: new Date("2026-01-02T10:00:00Z") }), [
      "ev01",
      "ev02",
      "ev04",
    ]);
    assert.deepEqual(
      await filtered({
        from: new Date("2026-01-01T10:00:00Z"),
        to: new Date("2026-01-02T10:00:00Z"),
        eventType: "page_viewed",
      }),
      ["ev01"],
    );
    // The same filters over one id take the single-id path.
    assert.deepEqual(await eventIds(sql, A, ["old1"], { eventType: "order_created" }), ["ev04"]);
    assert.deepEqual(
      await eventIds(sql, A, ["c1"], { from: new Date("2026-01-01T10:00:01Z") }),
      ["ev02"],
    );
  });
});

Deno.test("listProfileEvents: sorts, offset, keyset after and more", async () => {
  await withSeeded(async (sql) => {
    const all = ["c1", "old1"];
    const sorts: [EventListQuery["sort"], string[]][] = [
      ["itemId.keyword:asc", ["ev01", "ev02", "ev03", "ev04"]],
      ["itemId.keyword:desc", ["ev04", "ev03", "ev02", "ev01"]],
      ["timeStamp:asc", ["ev04", "ev01", "ev02", "ev03"]],
      ["timeStamp:desc", ["ev03", "ev02", "ev01", "ev04"]],
    ];
    for (const [sort, expected] of sorts) {
      assert.deepEqual(await eventIds(sql, A, all, { sort }), expected, sort);
    }
    const page = (query: Partial<EventListQuery>) =>
      listProfileEvents(sql, A, all, eventQuery(query));
    const offset = await page({ offset: 1, limit: 2 });
    assert.deepEqual(offset.list.map((e) => e.itemId), ["ev02", "ev03"]);
    assert.deepEqual([offset.total, offset.more], [4, true]);
    const tail = await page({ offset: 3, limit: 2 });
    assert.deepEqual(tail.list.map((e) => e.itemId), ["ev04"]);
    assert.equal(tail.more, false);
    // Keyset ignores offset; the total is the whole filtered history.
    const keyset = await page({ after: "ev02", offset: 3, limit: 1 });
    assert.deepEqual(keyset.list.map((e) => e.itemId), ["ev03"]);
    assert.deepEqual([keyset.total, keyset.more], [4, true]);
    const last = await page({ after: "ev03", limit: 1 });
    assert.deepEqual(last.list.map((e) => e.itemId), ["ev04"]);
    assert.equal(last.more, false);
    const exact = await page({ after: "ev02", limit: 2 });
    assert.deepEqual(exact.list.map((e) => e.itemId), ["ev03", "ev04"]);
    assert.equal(exact.more, false);
  });
});

Deno.test("identifiedProfileIds: server and merged profiles and absorbed ids, in the scope only", async () => {
  await withSeeded(async (sql) => {
    const asked = ["c1", "c3", "anon1", "anon2", "m1", "old1", "missing", "anonB"];
    assert.deepEqual(
      [...await identifiedProfileIds(sql, A, asked)].sort(),
      ["c1", "c3", "m1", "old1"],
    );
    // Scope B: its own server profile only; A's merged profile and alias are not B's.
    assert.deepEqual([...await identifiedProfileIds(sql, B, asked)].sort(), ["c1"]);
    assert.deepEqual([...await identifiedProfileIds(sql, A, [])], []);
  });
});
