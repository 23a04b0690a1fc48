import assert from "node:assert/strict";
import { appendChanges } from "../../../lib/audiences/changes.ts";
import { freshDatabase } from "../../test_support.ts";

const A = "acme.myshopify.com";
const T1 = new Date("2026-11-21T12:00:00.000Z");
const T2 = new Date("2026-11-21T12:01:00.000Z");

Deno.test("appendChanges: appends the feed in order and applies it to the members", async () => {
  const db = await freshDatabase();
  try {
    await db.sql.begin((tx) =>
      appendChanges(tx, A, [
        { segmentId: "s1", profileId: "p1", change: "entered", at: T1 },
        { segmentId: "s1", profileId: "p2", change: "entered", at: T1 },
        { segmentId: "s2", profileId: "p1", change: "entered", at: T1 },
      ])
    );
    await db.sql.begin((tx) =>
      appendChanges(tx, A, [{ segmentId: "s1", profileId: "p1", change: "exited", at: T2 }])
    );
    const feed = await db.sql<
      { id: string; segment_id: string; profile_id: string; change: string }[]
    >`
      select id, segment_id, profile_id, change from segment_changes where scope = ${A} order by position`;
    assert.deepEqual(
      feed.map((r) => [r.segment_id, r.profile_id, r.change]),
      [["s1", "p1", "entered"], ["s1", "p2", "entered"], ["s2", "p1", "entered"], [
        "s1",
        "p1",
        "exited",
      ]],
    );
    assert.deepEqual(feed.map((r) => r.id), [...feed.map((r) => r.id)].sort());
    const members = await db.sql<{ segment_id: string; profile_id: string }[]>`
      select segment_id, profile_id from segment_members where scope = ${A}
      order by segment_id, profile_id`;
    assert.deepEqual(members.map((r) => [r.segment_id, r.profile_id]), [["s1", "p2"], [
      "s2",
      "p1",
    ]]);
  } finally {
    await db.close();
  }
});

Deno.test("appendChanges: a feed row per segment and change holds up to 1,000 profiles; positions and ids follow the feed's order", async () => {
  const db = await freshDatabase();
  try {
    const profiles = Array.from({ length: 1_500 }, (_, i) => `p${String(i).padStart(4, "0")}`);
    await db.sql.begin((tx) =>
      appendChanges(tx, A, [
        ...profiles.map((profileId) => ({
          segmentId: "s1",
          profileId,
          change: "entered" as const,
          at: T1,
        })),
        { segmentId: "s2", profileId: "p0000", change: "entered", at: T1 },
      ])
    );
    const rows = await db.sql<{ segment_id: string; n: number }[]>`
      select segment_id, cardinality(profile_ids) as n from segment_feed order by seq`;
    assert.deepEqual(rows.map((r) => [r.segment_id, r.n]), [["s1", 1_000], ["s1", 500], [
      "s2",
      1,
    ]]);
    const feed = await db.sql<{ position: string; id: string; profile_id: string }[]>`
      select position::text as position, id, profile_id from segment_changes
      where segment_id = 's1' order by position`;
    assert.deepEqual(feed.map((r) => r.profile_id), profiles);
    assert.equal(new Set(feed.map((r) => r.id)).size, 1_500);
    assert.deepEqual(feed.map((r) => r.id), [...feed.map((r) => r.id)].sort());
    // The second row's positions start past the first's.
    assert.ok(BigInt(feed[1_000]!.position) > BigInt(feed[999]!.position));
    // One membership row per profile: p0000 in both segments, since T1.
    const [p0] = await db.sql<{ segments: Record<string, string> }[]>`
      select segments from profile_segments where scope = ${A} and profile_id = 'p0000'`;
    assert.deepEqual(p0!.segments, { s1: T1.toISOString(), s2: T1.toISOString() });
    const [count] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from profile_segments where scope = ${A}`;
    assert.equal(count!.n, 1_500);
    // Leaving the last segment removes the profile's row.
    await db.sql.begin((tx) =>
      appendChanges(tx, A, [
        { segmentId: "s1", profileId: "p0001", change: "exited", at: T2 },
      ])
    );
    const left = await db.sql`
      select 1 from profile_segments where scope = ${A} and profile_id = 'p0001'`;
    assert.equal(left.length, 0);
  } finally {
    await db.close();
  }
});
