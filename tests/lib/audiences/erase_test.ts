import assert from "node:assert/strict";
import { eraseFromAudiences } from "../../../lib/audiences/erase.ts";
import { appendChanges } from "../../../lib/audiences/changes.ts";
import { freshDatabase, testClock } from "../../test_support.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";

function payload(profileIds: string[]): string {
  return JSON.stringify({
    destination: "dst_1",
    deliveries: profileIds.map((id, i) => ({
      id: `dlv_${i}`,
      type: "segment.entered",
      segment: { id: "seg_vip", name: "VIP" },
      profile: { id, identity: { email: `${id}@example.com` } },
      at: "2026-01-01T00:00:00.000Z",
    })),
  });
}

Deno.test("eraseFromAudiences: the person's history and delivery entries go, one exited change per segment stays", async () => {
  const db = await freshDatabase();
  const clock = testClock();
  try {
    const sql = db.sql;
    const at = clock.now();
    for (const scope of [A, B]) {
      await sql.begin((tx) =>
        appendChanges(tx, scope, [
          { segmentId: "seg_vip", profileId: "p1", change: "entered", at },
          { segmentId: "seg_new", profileId: "p1", change: "entered", at },
          { segmentId: "seg_vip", profileId: "p2", change: "entered", at },
          { segmentId: "seg_old", profileId: "p1", change: "entered", at },
        ])
      );
      await sql.begin((tx) =>
        appendChanges(tx, scope, [
          { segmentId: "seg_old", profileId: "p1", change: "exited", at },
        ])
      );
    }
    await sql`
      insert into destinations (id, brand_id, scope, name, type, url, secret, segments,
                                created_at, updated_at)
      values ('dst_1', 'brand_a', ${A}, 'crm', 'webhook', 'https://example.com/hook', 's',
              array['seg_vip'], ${at}, ${at})`;
    const delivery = (id: string, ids: string[], status: string) =>
      sql`
        insert into destination_deliveries (id, destination_id, scope, payload, count, first_position,
          last_position, status, created_at, next_attempt_at, retry_until)
        values (${id}, 'dst_1', ${A}, ${payload(ids)}, ${ids.length}, 1, 2, ${status}, ${at},
                ${at}, ${at})`;
    await delivery("d_both", ["p1", "p2"], "pending");
    await delivery("d_alone", ["p1"], "dead");
    await delivery("d_other", ["p2"], "delivered");

    // p1 under two ids: the profile and an id merged into it.
    const counts = await sql.begin((tx) =>
      eraseFromAudiences(tx, { scope: A, profileIds: ["p1", "anon-1"] }, {
        now: clock.now,
      })
    );
    assert.deepEqual(counts, { memberships: 2, changes: 4, deliveries: 2 });

    const feed = await sql<{ segment_id: string; profile_id: string; change: string }[]>`
      select segment_id, profile_id, change from segment_changes where scope = ${A} order by position`;
    assert.deepEqual(feed.map((r) => `${r.change} ${r.segment_id} ${r.profile_id}`), [
      "entered seg_vip p2",
      "exited seg_new p1",
      "exited seg_vip p1",
    ]);
    const members = await sql<{ segment_id: string; profile_id: string }[]>`
      select segment_id, profile_id from segment_members where scope = ${A}
      order by segment_id, profile_id`;
    assert.deepEqual(members.map((m) => `${m.segment_id} ${m.profile_id}`), ["seg_vip p2"]);

    const rows = await sql<{ id: string; payload: string; count: number }[]>`
      select id, payload, count from destination_deliveries order by id`;
    assert.deepEqual(rows.map((r) => r.id), ["d_both", "d_other"]);
    const both = JSON.parse(rows[0]!.payload);
    assert.equal(rows[0]!.count, 1);
    assert.deepEqual(both.deliveries.map((d: { profile: { id: string } }) => d.profile.id), ["p2"]);
    assert.equal(both.deliveries[0].id, "dlv_1", "the others keep their delivery ids");
    assert.ok(!rows.some((r) => r.payload.includes("p1@example.com")));

    // Another brand's same ids are untouched.
    const other = await sql<{ n: number }[]>`
      select count(*)::int as n from segment_changes where scope = ${B} and profile_id = 'p1'`;
    assert.equal(other[0]!.n, 4);
  } finally {
    await db.close();
  }
});
