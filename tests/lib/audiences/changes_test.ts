import assert from "node:assert/strict";
import { appendChanges, writeDecided } from "../../../lib/audiences/changes.ts";
import { freshDatabase } from "../../test_support.ts";

const A = "acme.myshopify.com";
const T1 = new Date("2026-11-21T12:00:00.000Z");
const T2 = new Date("2026-11-21T12:01:00.000Z");
/** More profiles than one feed row holds. */
const profiles = Array.from({ length: 1_500 }, (_, i) => `p${String(i).padStart(4, "0")}`);

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

Deno.test("writeDecided: writes the diff as appendChanges does (exits first, a row per segment and change of up to 1,000 profiles in id order); a segment not decided ends unless kept", async () => {
  const db = await freshDatabase();
  try {
    await db.sql.begin((tx) =>
      appendChanges(tx, A, [
        { segmentId: "s1", profileId: "p0000", change: "entered", at: T1 },
        { segmentId: "s3", profileId: "p0000", change: "entered", at: T1 },
        { segmentId: "s4", profileId: "p0001", change: "entered", at: T1 },
        { segmentId: "s4", profileId: "p9999", change: "entered", at: T1 },
      ])
    );
    // s1 now holds for every profile but p0000, s2 for p0000 alone; s3 was not decided but is
    // kept; s4 was not decided.
    const decide = (ids: string[]) =>
      db.sql.begin((tx) =>
        writeDecided(tx, A, {
          decided: tx`
            all_ids (id) as (select unnest(${ids}::text[])),
            decided (k, members) as (
              values (0, ${profiles.slice(1)}::text[]), (1, array['p0000']))`,
          segmentIds: ["s1", "s2"],
          keep: ["s3"],
          at: T2,
        })
      );
    const counts = await decide([...profiles, "p9999"]);
    assert.deepEqual(counts, { entered: 1_500, exited: 3 });
    const rows = await db.sql<{ segment_id: string; change: string; n: number }[]>`
      select segment_id, change, cardinality(profile_ids) as n from segment_feed where at = ${T2}
      order by seq`;
    assert.deepEqual(rows.map((r) => [r.segment_id, r.change, r.n]), [
      ["s1", "exited", 1],
      ["s4", "exited", 2],
      ["s1", "entered", 1_000],
      ["s1", "entered", 499],
      ["s2", "entered", 1],
    ]);
    const entered = await db.sql<{ profile_id: string }[]>`
      select profile_id from segment_changes
      where segment_id = 's1' and change = 'entered' and at = ${T2} order by position`;
    assert.deepEqual(entered.map((r) => r.profile_id), profiles.slice(1));
    const held = await db.sql<{ profile_id: string; segments: Record<string, string> }[]>`
      select profile_id, segments from profile_segments
      where scope = ${A} and profile_id in ('p0000', 'p0001', 'p9999') order by profile_id`;
    assert.deepEqual(held.map((r) => [r.profile_id, r.segments]), [
      ["p0000", { s2: T2.toISOString(), s3: T1.toISOString() }],
      ["p0001", { s1: T2.toISOString() }],
    ]);
    // Nothing changed: nothing written.
    const again = await decide(profiles);
    assert.deepEqual(again, { entered: 0, exited: 0 });
    const [count] = await db.sql<{ n: number }[]>`select count(*)::int as n from segment_feed`;
    assert.equal(count!.n, 3 + 5);
  } finally {
    await db.close();
  }
});
