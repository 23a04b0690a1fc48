import assert from "node:assert/strict";
import { appendChanges, type MembershipChange } from "../../../lib/audiences/changes.ts";
import { eraseFromAudiences } from "../../../lib/audiences/erase.ts";
import { membershipHistory, readChanges } from "../../../lib/audiences/feed.ts";
import { freshDatabase } from "../../test_support.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";
const DAY1 = new Date("2026-11-20T10:00:00.000Z");
const DAY2 = new Date("2026-11-21T10:00:00.000Z");

const entered = (ids: string[], at: Date): MembershipChange[] =>
  ids.map((profileId) => ({ segmentId: "s1", profileId, change: "entered", at }));

Deno.test("readChanges: pages cross feed rows and writes in order, each change once, resuming mid-row", async () => {
  const db = await freshDatabase();
  try {
    const first = Array.from({ length: 1_200 }, (_, i) => `a${i}`);
    await db.sql.begin((tx) => appendChanges(tx, A, entered(first, DAY1)));
    // Another brand's write in between: its positions are not this feed's.
    await db.sql.begin((tx) => appendChanges(tx, B, entered(["x1"], DAY1)));
    await db.sql.begin((tx) =>
      appendChanges(tx, A, [{ segmentId: "s1", profileId: "a0", change: "exited", at: DAY2 }])
    );
    const seen: string[] = [];
    const ids = new Set<string>();
    let after = "0";
    for (let pages = 0; pages < 20; pages++) {
      const page = await readChanges(db.sql, { scope: A, segmentId: "s1", after, limit: 350 });
      if (page.list.length === 0) {
        assert.equal(page.last, after, "an empty page keeps the position");
        break;
      }
      for (const change of page.list) {
        seen.push(`${change.change === "entered" ? "+" : "-"}${change.profileId}`);
        ids.add(change.id);
      }
      after = page.last;
    }
    assert.deepEqual(seen, [...first.map((id) => `+${id}`), "-a0"]);
    assert.equal(ids.size, seen.length);
    const other = await readChanges(db.sql, { scope: B, segmentId: "s1", after: "0", limit: 10 });
    assert.deepEqual(other.list.map((c) => c.profileId), ["x1"]);
  } finally {
    await db.close();
  }
});

Deno.test("erasure blanks the person's feed entries: the others keep their ids and positions, counts drop", async () => {
  const db = await freshDatabase();
  try {
    await db.sql.begin((tx) => appendChanges(tx, A, entered(["p1", "p2", "p3"], DAY1)));
    await db.sql.begin((tx) =>
      appendChanges(tx, A, entered(["p2"], DAY2).map((c) => ({ ...c, segmentId: "s2" })))
    );
    const before = await readChanges(db.sql, { scope: A, segmentId: "s1", after: "0", limit: 10 });
    const counts = await db.sql.begin((tx) =>
      eraseFromAudiences(tx, { scope: A, profileIds: ["p2"] }, { now: () => DAY2 })
    );
    assert.equal(counts.changes, 2);
    const after = await readChanges(db.sql, { scope: A, segmentId: "s1", after: "0", limit: 10 });
    // p2's entry is gone; p1 and p3 keep theirs, then p2's exit (naming the id only) follows.
    assert.deepEqual(after.list.slice(0, 2), before.list.filter((c) => c.profileId !== "p2"));
    assert.deepEqual(after.list.slice(2).map((c) => [c.profileId, c.change]), [["p2", "exited"]]);
    // The row that held p2 alone in s2 is gone; s2's feed is its exit only.
    const s2 = await readChanges(db.sql, { scope: A, segmentId: "s2", after: "0", limit: 10 });
    assert.deepEqual(s2.list.map((c) => [c.profileId, c.change]), [["p2", "exited"]]);
    const history = await membershipHistory(db.sql, {
      scope: A,
      segmentId: "s1",
      now: DAY2,
      days: 2,
    });
    assert.deepEqual(history, [
      { day: "2026-11-20", entered: 2, exited: 0 },
      { day: "2026-11-21", entered: 0, exited: 1 },
    ]);
  } finally {
    await db.close();
  }
});

Deno.test("readChanges: positions order as numbers, also within a row whose positions gain a digit", async () => {
  const db = await freshDatabase();
  try {
    // Row 9765 spans positions 9,999,360 to 10,000,359.
    await db.sql`select setval(pg_get_serial_sequence('segment_feed', 'seq'), 9764)`;
    const ids = Array.from({ length: 1_000 }, (_, i) => `p${i}`);
    await db.sql.begin((tx) => appendChanges(tx, A, entered(ids, DAY1)));
    const seen: string[] = [];
    for (let after = "0";;) {
      const page = await readChanges(db.sql, { scope: A, segmentId: "s1", after, limit: 300 });
      if (page.list.length === 0) break;
      seen.push(...page.list.map((c) => c.profileId));
      after = page.last;
    }
    assert.deepEqual(seen, ids);
  } finally {
    await db.close();
  }
});
