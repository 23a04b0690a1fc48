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
