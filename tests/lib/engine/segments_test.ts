import assert from "node:assert/strict";
import type { Sql } from "../../../lib/store/db.ts";
import { countItems } from "../../../lib/engine/queries.ts";
import { queryCondition } from "../../../lib/engine/caller_condition.ts";
import {
  countMembers,
  countSegments,
  createSegment,
  getSegment,
  listSegments,
  MAX_SEGMENTS_PER_BRAND,
  openExport,
  openFullExport,
  type ReadBudget,
  scopeSegments,
  type Segment,
  segmentId,
  segmentMembers,
  segmentsOfProfile,
  segmentsOfProfiles,
  segmentView,
  updateSegment,
} from "../../../lib/engine/segments.ts";
import { segmentCondition } from "../../../lib/engine/caller_condition.ts";
import { type Condition, scopePredicate } from "../../../lib/engine/conditions.ts";
import { DomainError } from "../../../lib/errors.ts";
import { toHttpError } from "../../../lib/http/errors.ts";
import { DATABASE_URL, freshDatabase, statements } from "../../test_support.ts";
import { slowSegments } from "../../fixtures/slow_patterns.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";
const NOW = new Date("2026-11-21T12:00:00.000Z");

// [scope, id, provenance, properties, firstVisit, lastVisit]. B's profiles match every
// condition used here, and p035 sorts between A's ids, so a leak would show in any page.
const PROFILES: [string, string, string, Record<string, unknown>, string?, string?][] = [
  [A, "p01", "server", { age: 10, email: "p01@a.example" }],
  [A, "p02", "server", { age: 20 }],
  [A, "p03", "server", { age: 30, email: "p03@a.example", firstName: null }],
  [A, "p04", "server", { age: 40 }],
  [A, "p05", "server", { age: 50, email: "p05@a.example", firstName: "Eve" }],
  [A, "p06", "server", { email: "p06@a.example" }],
  [A, "p07", "pixel", { age: 60 }, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"],
  [B, "p01", "server", { age: 99, email: "p01@b.example" }],
  [B, "p035", "server", { age: 99, email: "p035@b.example" }],
  [B, "p08", "server", { age: 99, email: "p08@b.example" }],
];

async function insertProfile(
  sql: Sql,
  [scope, id, provenance, properties, firstVisit, lastVisit]: (typeof PROFILES)[number],
): Promise<void> {
  // The engine stamps every profile with its scope; direct inserts do the same.
  await sql`
    insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                          nb_of_visits, created_at, updated_at)
    values (${scope}, ${id}, ${sql.json({ ...properties, shopDomain: scope } as never)},
            ${provenance}, ${firstVisit ?? null}::timestamptz, ${lastVisit ?? null}::timestamptz,
            0, now(), now())`;
}

async function seed(sql: Sql): Promise<void> {
  for (const row of PROFILES) await insertProfile(sql, row);
  // p02 ordered in B, not in A: a pastEventCondition in A must not see it.
  for (const [scope, id, profileId] of [[A, "e1", "p01"], [B, "e2", "p02"]]) {
    await sql`
      insert into events (scope, id, profile_id, session_id, event_type, time_stamp, source,
                          received_at)
      values (${scope!}, ${id!}, ${profileId!}, 's', 'order_created', ${NOW}, 'server', now())`;
  }
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

const HAS_EMAIL = {
  type: "profilePropertyCondition",
  parameterValues: { propertyName: "properties.email", comparisonOperator: "exists" },
};
const MATCH_ALL = { type: "matchAllCondition", parameterValues: {} };
// deno-fmt-ignore
const NOTHING = {
  type: "profilePropertyCondition",
  parameterValues: { propertyName: "properties.age", comparisonOperator: "greaterThan", propertyValueInteger: 1000 },
};

function olderThan(age: number) {
  return {
    type: "profilePropertyCondition",
    parameterValues: {
      propertyName: "properties.age",
      comparisonOperator: "greaterThan",
      propertyValueInteger: age,
    },
  };
}

/** A segment view of scope A (not stored: the member functions read only scope and condition). */
function segment(raw: unknown, scope = A): Segment {
  return { id: "seg", name: "s", scope, condition: segmentCondition(raw) };
}

async function memberIds(
  sql: Sql,
  view: Segment,
  page: { limit?: number; offset?: number; after?: string } = {},
): Promise<string[]> {
  const result = await segmentMembers(sql, view, { limit: 100, ...page, now: NOW });
  return result.list.map((p) => p.itemId);
}

async function readText(stream: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(stream).text();
}

function isHttp(status: number) {
  return (err: unknown) => err instanceof DomainError && toHttpError(err).status === status;
}

// ---------------------------------------------------------------------------------------------
// segmentId, segmentCondition

Deno.test("segmentId: a scope-namespaced slug of the key or name", () => {
  assert.equal(segmentId(A, "My Segment!"), `seg__${A}__my_segment`);
  assert.equal(segmentId(A, "  Zoë's VIPs  "), `seg__${A}__zoe_s_vips`);
  assert.equal(segmentId(B, "vip"), `seg__${B}__vip`);
  assert.equal(segmentId(A, "x".repeat(80)), `seg__${A}__${"x".repeat(64)}`);
  assert.throws(() => segmentId(A, "!!!"), isHttp(400));
});

Deno.test("segmentCondition: a tree over the limits once injected is refused when saved", async () => {
  const branches = (n: number) => ({
    type: "booleanCondition",
    parameterValues: { operator: "or", subConditions: Array.from({ length: n }, () => HAS_EMAIL) },
  });
  // 199 branches pass the caller's validation alone, but not once the predicate is injected.
  assert.throws(
    () => segmentCondition(branches(199)),
    (err: unknown) =>
      err instanceof DomainError && toHttpError(err).status === 400 &&
      toHttpError(err).code === "invalid_condition" &&
      err.message.includes("$.condition.parameterValues.subConditions[197]"),
  );
  // The largest accepted tree is one the export can compile and run.
  const view: Segment = {
    id: "seg",
    name: "s",
    scope: A,
    condition: segmentCondition(branches(197)),
  };
  await withSeeded(async (sql) => {
    assert.deepEqual(
      (await exportPage(sql, view, { limit: 10 })).lines.map((l) => l.id),
      ["p01", "p03", "p05", "p06"],
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Storage

// Key order a jsonb value would normalize (jsonb sorts keys by length, then bytes).
const ZOE = {
  parameterValues: {
    propertyValue: 'Zoë  "q"  ',
    comparisonOperator: "equals",
    propertyName: "properties.firstName",
  },
  type: "profilePropertyCondition",
};

Deno.test("segments: the stored condition is byte for byte the one given, on create and update", async () => {
  await withSeeded(async (sql) => {
    const id = segmentId(A, "Zoe");
    const stored = async () => {
      const [row] = await sql<{ text: string }[]>`
        select condition::text as text from segments where scope = ${A} and id = ${id}`;
      return row!.text;
    };
    const condition = segmentCondition(ZOE);
    await createSegment(sql, { scope: A, id, name: "Zoe", condition, now: NOW });
    assert.equal(await stored(), JSON.stringify(condition));
    assert.equal(
      JSON.stringify((await getSegment(sql, A, id))!.condition),
      JSON.stringify(condition),
    );
    // Shown with the scope's predicate in front, from the scope column.
    assert.equal(
      JSON.stringify(segmentView((await getSegment(sql, A, id))!).condition),
      `{"type":"booleanCondition","parameterValues":{"operator":"and","subConditions":[` +
        `{"type":"profilePropertyCondition","parameterValues":{"propertyName":` +
        `"properties.shopDomain","comparisonOperator":"equals","propertyValue":"${A}"}},` +
        `${JSON.stringify(condition)}]}}`,
    );
    const next = segmentCondition({ type: "notCondition", parameterValues: { subCondition: ZOE } });
    await updateSegment(sql, { scope: A, id, condition: next, now: NOW });
    assert.equal(await stored(), JSON.stringify(next));
    assert.equal(JSON.stringify((await getSegment(sql, A, id))!.condition), JSON.stringify(next));
  });
});

Deno.test("segments: create, get, update and list round-trip, per scope", async () => {
  await withSeeded(async (sql) => {
    const raw = ZOE;
    const condition = segmentCondition(raw);
    const id = segmentId(A, "Zoe");
    const created = await createSegment(sql, {
      scope: A,
      id,
      name: "Zoe",
      description: "first",
      condition,
      now: NOW,
    });
    const expected = { id, name: "Zoe", description: "first", scope: A, condition };
    assert.deepEqual(created, expected);
    // Equal as values (key order is the ignored test above's concern).
    assert.deepEqual(await getSegment(sql, A, id), expected);
    // Another scope never sees it.
    assert.equal(await getSegment(sql, B, id), null);
    await assert.rejects(
      createSegment(sql, { scope: A, id, name: "Again", condition, now: NOW }),
      isHttp(409),
    );
    // The same id in another scope is another segment.
    const other = await createSegment(sql, {
      scope: B,
      id,
      name: "B's",
      condition: segmentCondition(raw),
      now: NOW,
    });
    assert.equal(other.description, undefined);
    assert.equal("description" in other, false);

    // An update without name or description keeps them.
    const next = segmentCondition(olderThan(25));
    assert.deepEqual(await updateSegment(sql, { scope: A, id, condition: next, now: NOW }), {
      ...expected,
      condition: next,
    });
    assert.deepEqual(
      await updateSegment(sql, {
        scope: A,
        id,
        name: "Renamed",
        description: "second",
        condition: next,
        now: NOW,
      }),
      { id, name: "Renamed", description: "second", scope: A, condition: next },
    );
    assert.equal((await getSegment(sql, A, id))!.name, "Renamed");
    assert.equal((await getSegment(sql, B, id))!.name, "B's");
    assert.equal(
      await updateSegment(sql, { scope: A, id: "seg__none", condition: next, now: NOW }),
      null,
    );

    await createSegment(sql, { scope: A, id: "seg__a", name: "a", condition, now: NOW });
    await createSegment(sql, { scope: A, id: "seg__z", name: "z", condition, now: NOW });
    const listed = await listSegments(sql, A, { limit: 2, offset: 0 });
    assert.deepEqual(listed.list.map((s) => s.id), ["seg__a", id]);
    assert.equal(listed.total, 3);
    assert.deepEqual(
      (await listSegments(sql, A, { limit: 2, offset: 2 })).list.map((s) => s.id),
      ["seg__z"],
    );
    assert.deepEqual(await listSegments(sql, B, { limit: 10, offset: 0 }), {
      list: [other],
      total: 1,
    });
    assert.deepEqual(await listSegments(sql, "empty.myshopify.com", { limit: 10, offset: 0 }), {
      list: [],
      total: 0,
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Members

Deno.test("segmentMembers: membership equals countItems on the same condition, scope only", async () => {
  await withSeeded(async (sql) => {
    // deno-fmt-ignore
    const ordered = {
      type: "pastEventCondition",
      parameterValues: {
        eventCondition: { type: "eventTypeCondition", parameterValues: { eventTypeId: "order_created" } },
      },
    };
    const cases: [unknown, string[]][] = [
      [HAS_EMAIL, ["p01", "p03", "p05", "p06"]],
      [olderThan(25), ["p03", "p04", "p05", "p07"]],
      [MATCH_ALL, ["p01", "p02", "p03", "p04", "p05", "p06", "p07"]],
      [{ type: "notCondition", parameterValues: { subCondition: HAS_EMAIL } }, [
        "p02",
        "p04",
        "p07",
      ]],
      [ordered, ["p01"]],
      [NOTHING, []],
    ];
    for (const [raw, expected] of cases) {
      const view = segment(raw);
      const label = JSON.stringify(raw);
      assert.deepEqual(await memberIds(sql, view), expected, label);
      const counted = await countItems(sql, {
        itemType: "profile",
        scope: A,
        condition: queryCondition(raw, "profile", NOW),
        now: NOW,
      });
      assert.equal(counted, expected.length, label);
      assert.equal(await countMembers(sql, view, NOW, 1000), expected.length, label);
    }
    // B's own segment sees only B's profiles.
    assert.deepEqual(await memberIds(sql, segment(HAS_EMAIL, B)), ["p01", "p035", "p08"]);
    // The stored tree holds no scope: the segment's scope column alone decides whose profiles.
    assert.deepEqual(await memberIds(sql, { ...segment(MATCH_ALL), scope: B }), [
      "p01",
      "p035",
      "p08",
    ]);
  });
});

Deno.test("segmentMembers: keyset and offset pages agree; more is set while members remain", async () => {
  await withSeeded(async (sql) => {
    const view = segment(MATCH_ALL);
    const byOffset: string[][] = [];
    const byKeyset: string[][] = [];
    const moreByOffset: boolean[] = [];
    const moreByKeyset: boolean[] = [];
    let after: string | undefined;
    for (let offset = 0; offset < 7; offset += 3) {
      const page = await segmentMembers(sql, view, { limit: 3, offset, now: NOW });
      byOffset.push(page.list.map((p) => p.itemId));
      moreByOffset.push(page.more);
      // Offset is ignored once after is given.
      const keyset = await segmentMembers(sql, view, {
        limit: 3,
        offset: 5,
        ...(after === undefined ? {} : { after }),
        now: NOW,
      });
      byKeyset.push(keyset.list.map((p) => p.itemId));
      moreByKeyset.push(keyset.more);
      after = keyset.list.at(-1)?.itemId;
    }
    // The first keyset page (no after) starts at offset 5.
    assert.deepEqual(byKeyset[0], ["p06", "p07"]);
    assert.deepEqual(byOffset, [["p01", "p02", "p03"], ["p04", "p05", "p06"], ["p07"]]);
    assert.deepEqual(moreByOffset, [true, true, false]);
    const walk = async (limit: number) => {
      const pages: string[][] = [];
      const mores: boolean[] = [];
      let cursor: string | undefined;
      for (let more = true; more;) {
        const page = await segmentMembers(sql, view, {
          limit,
          ...(cursor === undefined ? {} : { after: cursor }),
          now: NOW,
        });
        pages.push(page.list.map((p) => p.itemId));
        mores.push(page.more);
        cursor = page.list.at(-1)?.itemId;
        more = page.more;
      }
      return { pages, mores };
    };
    assert.deepEqual(await walk(3), { pages: byOffset, mores: moreByOffset });
    // Exactly a page: no more, and no empty page after it.
    assert.deepEqual(await walk(7), {
      pages: [["p01", "p02", "p03", "p04", "p05", "p06", "p07"]],
      mores: [false],
    });
    assert.deepEqual(await memberIds(sql, view, { after: "p07" }), []);
    assert.deepEqual(await memberIds(sql, view, { offset: 7 }), []);
    // An id between members positions the page; B's p035 is not one of them.
    assert.deepEqual(await memberIds(sql, view, { after: "p035", limit: 2 }), ["p04", "p05"]);
    // A member's view: visit columns as properties, provenance kept.
    const [p07] = (await segmentMembers(sql, view, { limit: 1, after: "p06", now: NOW })).list;
    assert.deepEqual(p07, {
      itemId: "p07",
      properties: {
        age: 60,
        shopDomain: A,
        firstVisit: "2026-01-01T00:00:00.000Z",
        lastVisit: "2026-02-01T00:00:00.000Z",
        nbOfVisits: 0,
      },
      provenance: "pixel",
    });
  });
});

Deno.test("countMembers: counts up to the cap", async () => {
  await withSeeded(async (sql) => {
    const view = segment(olderThan(25));
    assert.equal(await countMembers(sql, view, NOW, 100), 4);
    assert.equal(await countMembers(sql, view, NOW, 4), 4);
    assert.equal(await countMembers(sql, view, NOW, 3), 3);
    assert.equal(await countMembers(sql, view, NOW, 1), 1);
    assert.equal(await countMembers(sql, segment(NOTHING), NOW, 10), 0);
  });
});

// ---------------------------------------------------------------------------------------------
// Export

/** Opens an export page and reads it whole (which also ends its transaction). */
async function exportPage(
  sql: Sql,
  view: Segment,
  page: { after?: string; limit: number },
): Promise<{ lastId: string | null; more: boolean; lines: Record<string, unknown>[] }> {
  const opened = await openExport(sql, view, { ...page, now: NOW, timeoutMs: 5000 });
  const text = await readText(opened.lines);
  // NDJSON: every line, the last included, ends with a newline.
  assert.ok(text === "" || text.endsWith("\n"), text);
  const lines = text === "" ? [] : text.slice(0, -1).split("\n").map((line) => JSON.parse(line));
  return { lastId: opened.lastId, more: opened.more, lines };
}

Deno.test("openExport: the page's last id, whether members remain, and exactly its lines", async () => {
  await withSeeded(async (sql) => {
    // Members: p03, p04, p05, p07; B's p035 sorts between them and never shows.
    const view = segment(olderThan(25));
    const page = async (limit: number, after?: string) => {
      const out = await exportPage(sql, view, { limit, ...(after === undefined ? {} : { after }) });
      // The lines are the members in (after, lastId], in id order.
      return { lastId: out.lastId, more: out.more, ids: out.lines.map((l) => l.id as string) };
    };
    // Empty: no members at all, or none after the position.
    assert.deepEqual(
      await exportPage(sql, segment(NOTHING), { limit: 10 }),
      { lastId: null, more: false, lines: [] },
    );
    assert.deepEqual(await page(10, "p07"), { lastId: null, more: false, ids: [] });
    // Fewer than a page.
    assert.deepEqual(await page(10), {
      lastId: "p07",
      more: false,
      ids: ["p03", "p04", "p05", "p07"],
    });
    assert.deepEqual(await page(10, "p04"), { lastId: "p07", more: false, ids: ["p05", "p07"] });
    // Exactly a page.
    assert.deepEqual(await page(4), {
      lastId: "p07",
      more: false,
      ids: ["p03", "p04", "p05", "p07"],
    });
    assert.deepEqual(await page(2, "p04"), { lastId: "p07", more: false, ids: ["p05", "p07"] });
    // More than a page.
    assert.deepEqual(await page(3), { lastId: "p05", more: true, ids: ["p03", "p04", "p05"] });
    assert.deepEqual(await page(1), { lastId: "p03", more: true, ids: ["p03"] });
    assert.deepEqual(await page(2, "p03"), { lastId: "p05", more: true, ids: ["p04", "p05"] });
    assert.deepEqual(await page(1, "p03"), { lastId: "p04", more: true, ids: ["p04"] });
    // Walking by lastId visits every member once.
    const walked: string[] = [];
    let after: string | undefined;
    for (let more = true; more;) {
      const next = await page(3, after);
      walked.push(...next.ids);
      after = next.lastId ?? undefined;
      more = next.more;
    }
    assert.deepEqual(walked, ["p03", "p04", "p05", "p07"]);
  });
});

Deno.test(
  "openExport: each line is exportLine of the member",
  async () => {
    await withSeeded(async (sql) => {
      const { lines } = await exportPage(sql, segment(MATCH_ALL), { limit: 100 });
      assert.deepEqual(lines.map((l) => l.id), ["p01", "p02", "p03", "p04", "p05", "p06", "p07"]);
      // Identity fields present and not null (shopDomain included), never other properties.
      assert.deepEqual(lines[2], {
        id: "p03",
        provenance: "server",
        email: "p03@a.example",
        shopDomain: A,
        properties: {},
      });
      assert.deepEqual(lines[4], {
        id: "p05",
        provenance: "server",
        email: "p05@a.example",
        firstName: "Eve",
        shopDomain: A,
        properties: {},
      });
      assert.deepEqual(lines[6], {
        id: "p07",
        provenance: "pixel",
        shopDomain: A,
        properties: {
          firstVisit: "2026-01-01T00:00:00.000Z",
          lastVisit: "2026-02-01T00:00:00.000Z",
        },
      });
    });
  },
);

Deno.test("openExport: more rows than one fetch (1,000) stream whole and in order", async () => {
  const db = await freshDatabase();
  try {
    const { sql } = db;
    await sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      select ${A}, 'p' || lpad(n::text, 4, '0'), jsonb_build_object('shopDomain', ${A}::text),
             'server', now(), now()
      from generate_series(1, 2500) as n`;
    const page = await exportPage(sql, segment(MATCH_ALL), { limit: 2100, after: "p0100" });
    assert.deepEqual([page.lastId, page.more], ["p2200", true]);
    const ids = page.lines.map((l) => l.id as string);
    assert.equal(ids.length, 2100);
    assert.equal(ids[0], "p0101");
    assert.equal(ids.at(-1), "p2200");
    assert.deepEqual(ids, [...ids].sort());
    assert.equal(new Set(ids).size, 2100);
    const rest = await exportPage(sql, segment(MATCH_ALL), { limit: 2100, after: "p2200" });
    assert.deepEqual([rest.lastId, rest.more, rest.lines.length], ["p2500", false, 300]);
  } finally {
    await db.close();
  }
});

Deno.test("openFullExport: every member once, in id order, whatever the page size; onClose once", async () => {
  await withSeeded(async (sql) => {
    const view = segment(olderThan(25));
    const whole = await exportPage(sql, view, { limit: 100 });
    assert.deepEqual(whole.lines.map((l) => l.id), ["p03", "p04", "p05", "p07"]);
    const expected = whole.lines.map((l) => JSON.stringify(l) + "\n").join("");
    for (const pageSize of [1, 2, 3, 4, 5]) {
      let closed = 0;
      const lines = await openFullExport(sql, view, {
        pageSize,
        now: NOW,
        timeoutMs: 5000,
        onClose: () => closed++,
      });
      const text = await readText(lines);
      assert.equal(
        text.split("\n").filter((l) => l).map((l) => JSON.stringify(JSON.parse(l)) + "\n").join(""),
        expected,
        `page size ${pageSize}`,
      );
      assert.equal(closed, 1);
    }
    // Nothing to export: an empty body, closed once.
    let closed = 0;
    const empty = await openFullExport(sql, segment(NOTHING), {
      pageSize: 2,
      now: NOW,
      timeoutMs: 5000,
      onClose: () => closed++,
    });
    assert.equal(await readText(empty), "");
    assert.equal(closed, 1);
  });
});

Deno.test("openFullExport: a download cancelled part way gives its connection back", async () => {
  await withSeeded(async (sql) => {
    const view = segment(MATCH_ALL);
    for (let i = 0; i < 6; i += 1) {
      let closed = 0;
      const lines = await openFullExport(sql, view, {
        pageSize: 2,
        now: NOW,
        timeoutMs: 5000,
        onClose: () => closed++,
      });
      const reader = lines.getReader();
      assert.equal((await reader.read()).done, false);
      await reader.cancel();
      assert.equal(closed, 1);
    }
    assert.equal(await countMembers(sql, view, NOW, 100), 7);
  });
});

Deno.test("openExport: a cancelled body gives the connection back", async () => {
  await withSeeded(async (sql) => {
    const view = segment(MATCH_ALL);
    // More than the pool's connections (PGlite serves one session), each cancelled unread.
    for (let i = 0; i < 6; i += 1) {
      const opened = await openExport(sql, view, { limit: 2, now: NOW, timeoutMs: 5000 });
      assert.deepEqual([opened.lastId, opened.more], ["p02", true]);
      await opened.lines.cancel();
    }
    assert.equal(await countMembers(sql, view, NOW, 100), 7);
  });
});

Deno.test("openExport: pages open at once each keep their own rows", async () => {
  await withSeeded(async (sql) => {
    // Embedded PGlite serves all connections from one session, where held cursors share names.
    const first = await openExport(sql, segment(MATCH_ALL), {
      limit: 2,
      now: NOW,
      timeoutMs: 5000,
    });
    const second = await openExport(sql, segment(olderThan(25)), {
      limit: 10,
      now: NOW,
      timeoutMs: 5000,
    });
    const ids = async (page: { lines: ReadableStream<Uint8Array> }) =>
      (await readText(page.lines)).trimEnd().split("\n").map((l) => JSON.parse(l).id);
    assert.deepEqual(await ids(second), ["p03", "p04", "p05", "p07"]);
    assert.deepEqual(await ids(first), ["p01", "p02"]);
  });
});

Deno.test("openExport: a stored condition that cannot be evaluated is 502 upstream_error", async () => {
  await withSeeded(async (sql) => {
    // Saved when the validator still took it (99 * 99 expansions), too complex for Postgres:
    // the validator refuses it now, so the segment, not the request, is at fault.
    const view: Segment = {
      id: "seg",
      name: "s",
      scope: A,
      condition: {
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.email",
          comparisonOperator: "matchesRegex",
          propertyValue: "((a?){99}){99}",
        },
      },
    };
    await assert.rejects(
      openExport(sql, view, { limit: 10, now: NOW, timeoutMs: 5000 }),
      (err: unknown) =>
        err instanceof DomainError && toHttpError(err).status === 502 &&
        toHttpError(err).code === "upstream_error",
    );
    // The failed page left no transaction behind.
    assert.equal(await countMembers(sql, segment(MATCH_ALL), NOW, 100), 7);
  });
});

Deno.test("openExport: the condition runs under timeoutMs and is cancelled on the server", {
  // PGlite runs in this thread and does not enforce statement_timeout: nothing can interrupt it.
  ignore: !DATABASE_URL,
}, async () => {
  const db = await freshDatabase();
  try {
    const { sql } = db;
    // Few rows, slow to match: this regex costs tens of microseconds per 200-character email.
    await sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      select ${A}, 'p' || n, jsonb_build_object('shopDomain', ${A}::text,
               'email', 'user' || n || '@example.com' || repeat('x', 200)), 'server', now(), now()
      from generate_series(1, 60000) as n`;
    const view = segment({
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.email",
        comparisonOperator: "matchesRegex",
        propertyValue: "([a-z0-9]{1,30}){1,10}q",
      },
    });
    let closed = 0;
    await assert.rejects(
      openExport(sql, view, { limit: 10, now: NOW, timeoutMs: 200, onClose: () => closed++ }),
      (err: unknown) => (err as { code?: string }).code === "57014",
    );
    assert.equal(closed, 1);
    // The server stopped the statement itself: nothing of this database is still running.
    const [running] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state <> 'idle' and pid <> pg_backend_pid()`;
    assert.equal(running!.n, 0);
    // And the connection went back to the pool, out of its transaction.
    assert.equal(await countMembers(sql, segment(MATCH_ALL), NOW, 100_000), 60_000);
  } finally {
    await db.close();
  }
});

Deno.test("countMembers, segmentMembers: a stored date that time moved out of years 1 to 9999 is 502 upstream_error", async () => {
  await withSeeded(async (sql) => {
    // Valid when saved (now+7973y is 9999-11-21 at NOW); a year later it is in the year 10000.
    const view = segment({
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.seen",
        comparisonOperator: "lessThan",
        propertyValueDateExpr: "now+7973y",
      },
    });
    assert.equal(await countMembers(sql, view, NOW, 100), 0);
    const later = new Date(NOW.getTime() + 366 * 86_400_000);
    const is502 = (err: unknown) =>
      err instanceof DomainError && toHttpError(err).status === 502 &&
      /years 1 to 9999/.test(err.message);
    await assert.rejects(countMembers(sql, view, later, 100), is502);
    await assert.rejects(segmentMembers(sql, view, { limit: 10, now: later }), is502);
  });
});

// ---------------------------------------------------------------------------------------------
// segmentsOfProfile, countSegments, the cap on segments

/** A budget of `limit` permits that records how many were ever held at once. */
function recordedBudget(limit: number, timeoutMs = 5000) {
  let held = 0;
  const budget: ReadBudget & { maxHeld: number; taken: number } = {
    maxHeld: 0,
    taken: 0,
    timeoutMs,
    permit() {
      if (held >= limit) return null;
      held += 1;
      budget.taken += 1;
      budget.maxHeld = Math.max(budget.maxHeld, held);
      let released = false;
      return () => {
        if (!released) held -= 1;
        released = true;
      };
    },
  };
  return Object.assign(budget, { held: () => held });
}

async function store(sql: Sql, key: string, raw: unknown): Promise<Segment> {
  return await createSegment(sql, {
    scope: A,
    id: segmentId(A, key),
    name: key,
    condition: segmentCondition(raw),
    now: NOW,
  });
}

/** Writes a segment as the store holds it, past today's validation (saved under older rules). */
async function storeUnchecked(sql: Sql, key: string, raw: Condition): Promise<void> {
  await sql`
    insert into segments (scope, id, name, condition, created_at, updated_at)
    values (${A}, ${segmentId(A, key)}, ${key},
            ${JSON.stringify(raw)}::text::json, now(), now())`;
}

Deno.test("segmentsOfProfile: one statement decides every segment of the brand, on one permit", async () => {
  await withSeeded(async (sql) => {
    await store(sql, "adults", olderThan(18));
    await store(sql, "emails", HAS_EMAIL);
    await store(sql, "nobody", NOTHING);
    await store(sql, "all", MATCH_ALL);
    await store(sql, "ordered", {
      type: "pastEventCondition",
      parameterValues: {
        eventCondition: {
          type: "eventTypeCondition",
          parameterValues: { eventTypeId: "order_created" },
        },
      },
    });
    await store(sql, "regex", {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.email",
        comparisonOperator: "matchesRegex",
        propertyValue: "p0[1-3]@a\\.example",
      },
    });
    const budget = recordedBudget(1);
    let result: Awaited<ReturnType<typeof segmentsOfProfile>> | undefined;
    const sent = await statements(sql, async () => {
      result = await segmentsOfProfile(sql, A, "p01", NOW, budget);
    });
    const id = (key: string) => segmentId(A, key);
    assert.deepEqual(result, {
      member: [id("all"), id("emails"), id("ordered"), id("regex")],
      unknown: [],
    });
    // The list of segments, then one statement for all six conditions: none per segment.
    assert.equal(sent.filter((text) => /\bprofiles\b/.test(text)).length, 1);
    assert.equal(budget.taken, 1);
    assert.equal(budget.held(), 0);
    // p02 belongs to fewer, decided the same way.
    assert.deepEqual(await segmentsOfProfile(sql, A, "p02", NOW, recordedBudget(1)), {
      member: [id("adults"), id("all")],
      unknown: [],
    });
  });
});

Deno.test("segmentsOfProfiles: one statement decides every segment for a set of profiles, on one permit", async () => {
  await withSeeded(async (sql) => {
    await store(sql, "adults", olderThan(18));
    await store(sql, "emails", HAS_EMAIL);
    await store(sql, "nobody", NOTHING);
    await store(sql, "ordered", {
      type: "pastEventCondition",
      parameterValues: {
        eventCondition: {
          type: "eventTypeCondition",
          parameterValues: { eventTypeId: "order_created" },
        },
      },
    });
    // A row of another shape, which migration 0020 left as it was (a scope predicate beside
    // the tree): evaluated whole, the predicate reading the scope column.
    const legacy = {
      type: "booleanCondition",
      parameterValues: { operator: "or", subConditions: [scopePredicate(B), olderThan(45)] },
    };
    await sql`
      insert into segments (scope, id, name, description, condition, created_at, updated_at)
      values (${A}, ${segmentId(A, "legacy")}, 'legacy', null,
              ${JSON.stringify(legacy)}::text::json, ${NOW}, ${NOW})`;
    const budget = recordedBudget(1);
    let result: Map<string, { member: string[]; unknown: string[] }> | undefined;
    // p08 exists only in B, p99 nowhere: both belong to nothing here; p01 is asked twice.
    const ids = ["p01", "p02", "p05", "p06", "p08", "p99", "p01"];
    const sent = await statements(sql, async () => {
      result = await segmentsOfProfiles(sql, A, ids, NOW, budget);
    });
    const id = (key: string) => segmentId(A, key);
    assert.deepEqual(Object.fromEntries(result!), {
      p01: { member: [id("emails"), id("ordered")], unknown: [] },
      p02: { member: [id("adults")], unknown: [] },
      p05: { member: [id("adults"), id("emails"), id("legacy")], unknown: [] },
      p06: { member: [id("emails")], unknown: [] },
      p08: { member: [], unknown: [] },
      p99: { member: [], unknown: [] },
    });
    // The list of segments, then one statement for every segment and every profile.
    assert.equal(sent.filter((text) => /\bprofiles\b/.test(text)).length, 1);
    assert.equal(budget.taken, 1);
    assert.equal(budget.held(), 0);
    // Each profile alone is decided the same way.
    for (const profileId of ["p01", "p02", "p05", "p06", "p08"]) {
      assert.deepEqual(
        await segmentsOfProfile(sql, A, profileId, NOW, recordedBudget(1)),
        result!.get(profileId),
        profileId,
      );
    }
    // No profile asked: no statement, no permit.
    const idle = recordedBudget(1);
    assert.deepEqual(await segmentsOfProfiles(sql, A, [], NOW, idle), new Map());
    assert.equal(idle.taken, 0);
    // Without a permit every segment is unknown for every profile.
    const none = await segmentsOfProfiles(sql, A, ["p01", "p02"], NOW, recordedBudget(0));
    const all = [id("adults"), id("emails"), id("legacy"), id("nobody"), id("ordered")];
    assert.deepEqual(none.get("p01"), { member: [], unknown: all });
    assert.deepEqual(none.get("p02"), { member: [], unknown: all });
  });
});

/**
 * Stores `emails` and `r1_runtime`: valid and compiled, failing when PostgreSQL runs it on a
 * profile with an email (its date helper is replaced by one that raises).
 */
async function storeFailing(sql: Sql): Promise<void> {
  await store(sql, "emails", HAS_EMAIL);
  await store(sql, "r1_runtime", {
    type: "profilePropertyCondition",
    parameterValues: {
      propertyName: "properties.email",
      comparisonOperator: "lessThan",
      propertyValueDate: "2020-01-01T00:00:00Z",
    },
  });
  await sql.unsafe(`
    create or replace function cdp_try_timestamptz(value text) returns timestamptz
    language plpgsql immutable strict parallel safe as $fn$
    begin
      raise exception 'regular expression is too complex' using errcode = '54000';
    end $fn$`);
}

Deno.test("segmentsOfProfile: a segment that fails is unknown, the others decided; without a permit all are unknown", async () => {
  await withSeeded(async (sql) => {
    // r1_runtime fails as the regex compiler did for patterns it found too complex.
    await storeFailing(sql);
    // Too complex for Postgres, valid for the validator before the cost rule: stored as an
    // older validator let it through, it is refused when compiled, never run.
    await storeUnchecked(sql, "r1_complex", {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.email",
        comparisonOperator: "matchesRegex",
        propertyValue: "((a?){99}){99}",
      },
    });
    // Evaluated after the failing one, in a statement of its own.
    await store(sql, "r2_plain", {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.email",
        comparisonOperator: "matchesRegex",
        propertyValue: "p01@.*",
      },
    });
    // A stored tree the compiler refuses (written before a rule changed): never run.
    await sql`
      insert into segments (scope, id, name, condition, created_at, updated_at)
      values (${A}, ${segmentId(A, "r0_refused")}, 'refused',
              ${
      JSON.stringify({
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.email",
          comparisonOperator: "matchesRegex",
          propertyValue: "(",
        },
      })
    }::text::json, now(), now())`;
    const id = (key: string) => segmentId(A, key);
    const budget = recordedBudget(1);
    assert.deepEqual(await segmentsOfProfile(sql, A, "p01", NOW, budget), {
      member: [id("emails"), id("r2_plain")],
      unknown: [id("r0_refused"), id("r1_complex"), id("r1_runtime")],
    });
    assert.equal(budget.held(), 0);
    // The brand's share taken: nothing is evaluated, every segment is unknown.
    const sent = await statements(sql, async () => {
      assert.deepEqual(await segmentsOfProfile(sql, A, "p01", NOW, recordedBudget(0)), {
        member: [],
        unknown: [
          id("emails"),
          id("r0_refused"),
          id("r1_complex"),
          id("r1_runtime"),
          id("r2_plain"),
        ],
      });
    });
    assert.equal(sent.filter((text) => /\bprofiles\b/.test(text)).length, 0);
  });
});

Deno.test("segmentsOfProfile: a segment past the time budget is unknown, the cheap ones decided", {
  // PGlite runs in this thread and does not enforce statement_timeout: nothing can interrupt it.
  ignore: !DATABASE_URL,
}, async () => {
  await withSeeded(async (sql) => {
    await store(sql, "emails", HAS_EMAIL);
    await store(sql, "all", MATCH_ALL);
    // Compiling their 80 distinct patterns (20 each, the cap) takes many times the budget of
    // 100 ms; the cost rule accepts each.
    const slow = Object.keys(slowSegments(4, "sop"));
    for (const [key, condition] of Object.entries(slowSegments(4, "sop"))) {
      await store(sql, `a_${key}`, condition);
    }
    const budget = recordedBudget(1, 100);
    const result = await segmentsOfProfile(sql, A, "p01", NOW, budget);
    // The cheap ones run first and are decided; the budget ends among the slow ones (how many
    // of them finish before it is the machine's business), which match nobody: only slow ones
    // are unknown, and at least the one the budget cut.
    assert.deepEqual(result.member, [segmentId(A, "all"), segmentId(A, "emails")]);
    const slowIds = slow.map((key) => segmentId(A, `a_${key}`));
    assert.ok(result.unknown.length > 0, "no segment was cut by the budget");
    assert.ok(result.unknown.every((id) => slowIds.includes(id)), String(result.unknown));
    assert.equal(budget.held(), 0);
    // The server stopped the statement: nothing of this database is still running.
    const [running] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state <> 'idle' and pid <> pg_backend_pid()`;
    assert.equal(running!.n, 0);
  });
});

Deno.test("segmentsOfProfiles: a segment that fails is unknown for every profile, the others decided for each", async () => {
  await withSeeded(async (sql) => {
    await storeFailing(sql);
    // A pattern: evaluated after the failing one, in a statement of its own.
    await store(sql, "r2_plain", {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.email",
        comparisonOperator: "matchesRegex",
        propertyValue: "p0[13]@.*",
      },
    });
    const id = (key: string) => segmentId(A, key);
    const budget = recordedBudget(1);
    const result = await segmentsOfProfiles(sql, A, ["p01", "p02", "p03"], NOW, budget);
    assert.deepEqual(Object.fromEntries(result), {
      p01: { member: [id("emails"), id("r2_plain")], unknown: [id("r1_runtime")] },
      p02: { member: [], unknown: [id("r1_runtime")] },
      p03: { member: [id("emails"), id("r2_plain")], unknown: [id("r1_runtime")] },
    });
    assert.equal(budget.taken, 1);
    assert.equal(budget.held(), 0);
  });
});

Deno.test("segmentsOfProfiles within a transaction: a failed segment leaves it usable, its timeout put back", async () => {
  await withSeeded(async (sql) => {
    await storeFailing(sql);
    const id = (key: string) => segmentId(A, key);
    const segments = await scopeSegments(sql, A);
    await sql.begin(async (tx) => {
      await tx`set local statement_timeout = '4321ms'`;
      const result = await segmentsOfProfiles(sql, A, ["p01", "p02"], NOW, recordedBudget(1), {
        within: tx,
        segments,
      });
      assert.deepEqual(Object.fromEntries(result), {
        p01: { member: [id("emails")], unknown: [id("r1_runtime")] },
        p02: { member: [], unknown: [id("r1_runtime")] },
      });
      // The transaction goes on, under the timeout it had.
      const [after] = await tx<{ timeout: string }[]>`
        select current_setting('statement_timeout') as timeout`;
      assert.equal(after!.timeout, "4321ms");
    });
  });
});

Deno.test("segmentsOfProfile: a spent budget leaves the segments unknown without running them", async () => {
  await withSeeded(async (sql) => {
    await store(sql, "emails", HAS_EMAIL);
    await store(sql, "all", MATCH_ALL);
    // A clock that has moved past the budget by the time the first statement would start.
    let time = 0;
    const budget = { ...recordedBudget(1, 100), clock: () => (time += 200) };
    const sent = await statements(sql, async () => {
      assert.deepEqual(await segmentsOfProfile(sql, A, "p01", NOW, budget), {
        member: [],
        unknown: [segmentId(A, "all"), segmentId(A, "emails")],
      });
    });
    assert.equal(sent.filter((text) => /\bprofiles\b/.test(text)).length, 0);
    assert.equal(budget.held(), 0);
    // And a dashboard's counts likewise.
    const views = [{ ...segment(MATCH_ALL), id: "s0" }];
    time = 0;
    assert.deepEqual(
      await countSegments(sql, views, {
        now: NOW,
        cap: 100,
        budget: { ...recordedBudget(1, 100), clock: () => (time += 200) },
      }),
      [null],
    );
  });
});

Deno.test("segmentsOfProfile: more bound values than one statement carries go in several, every segment decided", async () => {
  await withSeeded(async (sql) => {
    // 120 segments of 190 comparisons each: about 70,000 bound values, past the protocol's 65,535.
    const wide = (n: number) => ({
      type: "booleanCondition",
      parameterValues: {
        operator: "or",
        subConditions: Array.from({ length: 190 }, (_, i) => ({
          type: "profilePropertyCondition",
          parameterValues: {
            propertyName: "properties.email",
            comparisonOperator: "equals",
            propertyValue: i === 0 && n % 2 === 0 ? "p01@a.example" : `nobody${n}_${i}@x`,
          },
        })),
      },
    });
    for (let n = 0; n < 120; n++) await store(sql, `w${String(n).padStart(3, "0")}`, wide(n));
    let result: Awaited<ReturnType<typeof segmentsOfProfile>> | undefined;
    const sent = await statements(sql, async () => {
      result = await segmentsOfProfile(sql, A, "p01", NOW, recordedBudget(1, 60_000));
    });
    assert.deepEqual(result!.unknown, []);
    assert.deepEqual(
      result!.member,
      Array.from({ length: 60 }, (_, i) => segmentId(A, `w${String(2 * i).padStart(3, "0")}`)),
    );
    assert.ok(sent.filter((text) => /\bprofiles\b/.test(text)).length >= 2);
  });
});

Deno.test("countSegments: counts on the free permits only, never more at once; none free, none counted", async () => {
  await withSeeded(async (sql) => {
    const views = [olderThan(18), HAS_EMAIL, NOTHING, MATCH_ALL, olderThan(45)].map((raw, i) => ({
      ...segment(raw),
      id: `s${i}`,
    }));
    const budget = recordedBudget(2);
    const counts = await countSegments(sql, views, { now: NOW, cap: 100, budget });
    assert.deepEqual(counts, [5, 4, 0, 7, 2]);
    assert.equal(budget.maxHeld, 2);
    assert.equal(budget.held(), 0);
    const none = await countSegments(sql, views, { now: NOW, cap: 100, budget: recordedBudget(0) });
    assert.deepEqual(none, [null, null, null, null, null]);
    // A count that fails is null; the others are made.
    // One stored before the cost rule, which the validator now refuses.
    const failing = { ...segment(MATCH_ALL), id: "bad" };
    failing.condition = {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.email",
        comparisonOperator: "matchesRegex",
        propertyValue: "((a?){99}){99}",
      },
    };
    assert.deepEqual(
      await countSegments(sql, [failing, views[3]!], {
        now: NOW,
        cap: 100,
        budget: recordedBudget(1),
      }),
      [null, 7],
    );
  });
});

Deno.test("createSegment: at most MAX_SEGMENTS_PER_BRAND per brand, a 400 naming the limit", async () => {
  await withSeeded(async (sql) => {
    await sql`
      insert into segments (scope, id, name, condition, created_at, updated_at)
      select ${A}, 'seg__' || ${A}::text || '__n' || n, 'n' || n, '{}'::json, now(), now()
      from generate_series(1, ${MAX_SEGMENTS_PER_BRAND - 1}) as n`;
    await store(sql, "last", HAS_EMAIL);
    const refused = await store(sql, "one_more", HAS_EMAIL).then(() => null, (err) => err);
    assert.ok(refused instanceof DomainError, String(refused));
    assert.equal(toHttpError(refused).status, 400);
    assert.match(refused.message, new RegExp(`at most ${MAX_SEGMENTS_PER_BRAND} segments`));
    assert.match(refused.message, /MAX_SEGMENTS_PER_BRAND/);
    // Another brand is not counted against it; an update is not a definition.
    await createSegment(sql, {
      scope: B,
      id: segmentId(B, "mine"),
      name: "mine",
      condition: segmentCondition(HAS_EMAIL),
      now: NOW,
    });
    assert.ok(
      await updateSegment(sql, {
        scope: A,
        id: segmentId(A, "last"),
        condition: segmentCondition(MATCH_ALL),
        now: NOW,
      }),
    );
    const [row] = await sql<
      { n: number }[]
    >`select count(*)::int as n from segments where scope = ${A}`;
    assert.equal(row!.n, MAX_SEGMENTS_PER_BRAND);
  });
});
