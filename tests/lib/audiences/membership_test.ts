import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  exitProfiles,
  type MembershipDeps,
  refreshSegment,
  updateMembership,
} from "../../../lib/audiences/membership.ts";
import { appendChanges } from "../../../lib/audiences/changes.ts";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import type { IngestEvent } from "../../../lib/engine/engine.ts";
import { createSegment, updateSegment } from "../../../lib/engine/segments.ts";
import type { Condition } from "../../../lib/engine/conditions.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { freshDatabase, statements, type TestClock, testClock } from "../../test_support.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";
const newId = monotonicFactory();

const ageAtLeast = (n: number): Condition => ({
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.age",
    comparisonOperator: "greaterThanOrEqualTo",
    propertyValueInteger: n,
  },
});

interface Fixture {
  sql: Sql;
  clock: TestClock;
  deps: MembershipDeps;
  /** Sets each profile's age (creating it), through the engine. */
  setAges(scope: string, ages: Record<string, number>): Promise<void>;
  members(scope: string, segmentId: string): Promise<string[]>;
  feed(scope: string): Promise<string[]>;
  define(scope: string, key: string, condition: Condition): Promise<string>;
}

async function withFixture(
  fn: (f: Fixture) => Promise<void>,
  permit: () => (() => void) | null = () => () => {},
): Promise<void> {
  const db = await freshDatabase();
  const clock = testClock();
  const engine = createEmbeddedEngine({ sql: db.sql, now: clock.now });
  const deps: MembershipDeps = {
    sql: db.sql,
    now: clock.now,
    budget: () => ({ permit, timeoutMs: 10_000 }),
    refreshTimeoutMs: 10_000,
  };
  try {
    await fn({
      sql: db.sql,
      clock,
      deps,
      async setAges(scope, ages) {
        const events: IngestEvent[] = Object.entries(ages).map(([profileId, age]) => ({
          id: newId(),
          eventType: "updateProperties",
          profileId,
          properties: { update: { "properties.age": age } },
        }));
        const results = await engine.applyEvents({
          scope,
          source: "server",
          receivedAt: clock.now().toISOString(),
          events,
        });
        assert.ok(results.every((r) => r.ok), JSON.stringify(results));
      },
      async members(scope, segmentId) {
        const rows = await db.sql<{ profile_id: string }[]>`
          select profile_id from segment_members
          where scope = ${scope} and segment_id = ${segmentId} order by profile_id`;
        return rows.map((r) => r.profile_id);
      },
      async feed(scope) {
        const rows = await db.sql<{ segment_id: string; profile_id: string; change: string }[]>`
          select segment_id, profile_id, change from segment_changes
          where scope = ${scope} order by position`;
        return rows.map((r) => `${r.change} ${r.segment_id.split("__").at(-1)} ${r.profile_id}`);
      },
      async define(scope, key, condition) {
        const id = `seg__${scope}__${key}`;
        await createSegment(db.sql, { scope, id, name: key, condition, now: clock.now() });
        return id;
      },
    });
  } finally {
    await db.close();
  }
}

Deno.test("updateMembership: touched profiles enter and exit every segment of their brand, the diff only", async () => {
  await withFixture(async (f) => {
    const adults = await f.define(A, "adults", ageAtLeast(18));
    const seniors = await f.define(A, "seniors", ageAtLeast(65));
    const otherAdults = await f.define(B, "adults", ageAtLeast(18));
    await f.setAges(A, { p1: 30, p2: 70, p3: 10 });
    await f.setAges(B, { p1: 40 });
    assert.deepEqual(await updateMembership(f.deps, A, ["p1", "p2", "p3"]), {
      entered: 3,
      exited: 0,
    });
    assert.deepEqual(await f.members(A, adults), ["p1", "p2"]);
    assert.deepEqual(await f.members(A, seniors), ["p2"]);
    // Brand B's segment is not evaluated for brand A's touched profiles.
    assert.deepEqual(await f.members(B, otherAdults), []);
    // Unchanged data (a redelivery) writes nothing.
    assert.deepEqual(await updateMembership(f.deps, A, ["p1", "p2", "p3"]), {
      entered: 0,
      exited: 0,
    });
    await f.setAges(A, { p2: 40, p3: 20 });
    await updateMembership(f.deps, A, ["p2", "p3"]);
    assert.deepEqual(await f.members(A, adults), ["p1", "p2", "p3"]);
    assert.deepEqual(await f.members(A, seniors), []);
    assert.deepEqual(await f.feed(A), [
      "entered adults p1",
      "entered adults p2",
      "entered seniors p2",
      "exited seniors p2",
      "entered adults p3",
    ]);
    assert.deepEqual(await f.feed(B), []);
  });
});

Deno.test("updateMembership: one statement evaluates every segment and writes the diff", async () => {
  await withFixture(async (f) => {
    const adults = await f.define(A, "adults", ageAtLeast(18));
    await f.define(A, "seniors", ageAtLeast(65));
    await f.setAges(A, { p1: 30, p2: 70 });
    const sent = await statements(f.sql, async () => {
      assert.deepEqual(await updateMembership(f.deps, A, ["p1", "p2"]), { entered: 3, exited: 0 });
    });
    const writes = sent.filter((text) => /\bsegment_feed\b/.test(text));
    assert.equal(writes.length, 1);
    assert.match(writes[0]!, /\bprofiles\b/);
    assert.equal(sent.filter((text) => /\bprofiles\b/.test(text)).length, 1);
    assert.deepEqual(await f.members(A, adults), ["p1", "p2"]);
  });
});

Deno.test("updateMembership: a segment failing on the data keeps its members; the others are decided and written in steps", async () => {
  await withFixture(async (f) => {
    const adults = await f.define(A, "adults", ageAtLeast(18));
    const broken = await f.define(A, "broken", {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.age",
        comparisonOperator: "lessThan",
        propertyValueDate: "2020-01-01T00:00:00Z",
      },
    });
    await f.setAges(A, { p1: 30, p2: 10 });
    await updateMembership(f.deps, A, ["p1", "p2"]);
    await f.sql.begin((tx) =>
      appendChanges(tx, A, [
        { segmentId: broken, profileId: "p2", change: "entered", at: f.clock.now() },
      ])
    );
    // The broken segment's date helper now raises, as a data error would.
    await f.sql.unsafe(`
      create or replace function cdp_try_timestamptz(value text) returns timestamptz
      language plpgsql immutable strict parallel safe as $fn$
      begin
        raise exception 'invalid input' using errcode = '22007';
      end $fn$`);
    await f.setAges(A, { p1: 10, p2: 30 });
    const sent = await statements(f.sql, async () => {
      assert.deepEqual(await updateMembership(f.deps, A, ["p1", "p2"]), { entered: 1, exited: 1 });
    });
    assert.ok(sent.some((text) => /jsonb_to_recordset/.test(text)), "written in steps");
    assert.deepEqual(await f.members(A, adults), ["p2"]);
    assert.deepEqual(await f.members(A, broken), ["p2"]);
    assert.deepEqual((await f.feed(A)).slice(-2), ["exited adults p1", "entered adults p2"]);
  });
});

Deno.test("updateMembership: without a permit of the brand's share nothing is decided and nothing changes", async () => {
  await withFixture(async (f) => {
    const adults = await f.define(A, "adults", ageAtLeast(18));
    await f.setAges(A, { p1: 30 });
    assert.deepEqual(await updateMembership(f.deps, A, ["p1"]), { entered: 0, exited: 0 });
    assert.deepEqual(await f.members(A, adults), []);
  }, () => null);
});

Deno.test("updateMembership: a profile that no longer exists leaves its segments", async () => {
  await withFixture(async (f) => {
    const adults = await f.define(A, "adults", ageAtLeast(18));
    await f.setAges(A, { p1: 30 });
    await updateMembership(f.deps, A, ["p1"]);
    await f.sql`delete from profiles where scope = ${A} and item_id = 'p1'`;
    await updateMembership(f.deps, A, ["p1"]);
    assert.deepEqual(await f.members(A, adults), []);
    assert.deepEqual(await f.feed(A), ["entered adults p1", "exited adults p1"]);
  });
});

Deno.test("refreshSegment: a new segment's members enter; a changed condition writes the diff; a deleted one's members exit", async () => {
  await withFixture(async (f) => {
    await f.setAges(A, { p1: 30, p2: 70, p3: 10 });
    await f.setAges(B, { p1: 40 });
    const adults = await f.define(A, "adults", ageAtLeast(18));
    assert.deepEqual(await refreshSegment(f.deps, A, adults), { entered: 2, exited: 0 });
    assert.deepEqual(await f.members(A, adults), ["p1", "p2"]);
    assert.deepEqual(await refreshSegment(f.deps, A, adults), { entered: 0, exited: 0 });
    await updateSegment(f.sql, {
      scope: A,
      id: adults,
      condition: ageAtLeast(21),
      now: f.clock.now(),
    });
    await f.setAges(A, { p3: 25 });
    await updateSegment(f.sql, {
      scope: A,
      id: adults,
      condition: ageAtLeast(50),
      now: f.clock.now(),
    });
    assert.deepEqual(await refreshSegment(f.deps, A, adults), { entered: 0, exited: 1 });
    assert.deepEqual(await f.members(A, adults), ["p2"]);
    await f.sql`delete from segments where scope = ${A} and id = ${adults}`;
    assert.deepEqual(await refreshSegment(f.deps, A, adults), { entered: 0, exited: 1 });
    assert.deepEqual(await f.feed(A), [
      "entered adults p1",
      "entered adults p2",
      "exited adults p1",
      "exited adults p2",
    ]);
    assert.deepEqual(await f.feed(B), []);
  });
});

Deno.test("exitProfiles: erased profiles leave every segment, in the erasing transaction", async () => {
  await withFixture(async (f) => {
    const adults = await f.define(A, "adults", ageAtLeast(18));
    const seniors = await f.define(A, "seniors", ageAtLeast(65));
    await f.setAges(A, { p1: 30, p2: 70 });
    await updateMembership(f.deps, A, ["p1", "p2"]);
    const exited = await f.sql.begin((tx) =>
      exitProfiles(tx, { scope: A, profileIds: ["p2", "p9"], now: f.clock.now() })
    );
    assert.equal(exited, 2);
    assert.deepEqual(await f.members(A, adults), ["p1"]);
    assert.deepEqual(await f.members(A, seniors), []);
    assert.deepEqual((await f.feed(A)).slice(-2), ["exited adults p2", "exited seniors p2"]);
  });
});
