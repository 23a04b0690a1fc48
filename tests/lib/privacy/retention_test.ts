import assert from "node:assert/strict";
import {
  enforceRetention,
  readEventRetention,
  setEventRetention,
} from "../../../lib/privacy/retention.ts";
import { withBrandDatabase } from "../../test_support.ts";

const SCOPE = "b.myshopify.com";
const NOW = new Date("2026-11-21T12:00:00Z");
const DAY = 86_400_000;

async function seedEvents(sql: Parameters<Parameters<typeof withBrandDatabase>[0]>[0]) {
  for (
    const [id, daysAgo, scope] of [["old", 40, SCOPE], ["recent", 5, SCOPE], [
      "other",
      40,
      "x",
    ]] as const
  ) {
    await sql`
      insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                          flattened_properties, source, received_at)
      values (${scope}, ${id}, 'p', 's', 'page_viewed', ${new Date(NOW.getTime() - daysAgo * DAY)},
              '{}', '{}', 'server', ${NOW})`;
  }
}

const ids = async (sql: Parameters<Parameters<typeof withBrandDatabase>[0]>[0]) =>
  (await sql<{ id: string }[]>`select id from events order by id`).map((r) => r.id);

Deno.test("retention: unlimited by default; a change is enforced by the next sweep, then daily", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await seedEvents(sql);
    assert.equal(await readEventRetention(sql, brandId), null);
    assert.deepEqual(await enforceRetention(sql, NOW), { brands: 0, events: 0 });
    await setEventRetention(sql, brandId, 30);
    assert.equal(await readEventRetention(sql, brandId), 30);
    assert.deepEqual(await enforceRetention(sql, NOW), { brands: 1, events: 1 });
    assert.deepEqual(await ids(sql), ["other", "recent"]);
    // Swept: not again within the day, again after it.
    assert.deepEqual(await enforceRetention(sql, new Date(NOW.getTime() + 60_000)), {
      brands: 0,
      events: 0,
    });
    assert.deepEqual(await enforceRetention(sql, new Date(NOW.getTime() + DAY)), {
      brands: 1,
      events: 0,
    });
    // A shorter retention is due at once.
    await setEventRetention(sql, brandId, 2);
    assert.deepEqual(await enforceRetention(sql, new Date(NOW.getTime() + DAY + 60_000)), {
      brands: 1,
      events: 1,
    });
    assert.deepEqual(await ids(sql), ["other"]);
    await assert.rejects(setEventRetention(sql, "nope", 3), /no brand/);
  });
});
