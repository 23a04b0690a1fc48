import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { createBrand } from "../../../lib/tenancy/brands.ts";
import { ORDER_STATES } from "../../../lib/commerce/order_lines.ts";
import { listOrders } from "../../../lib/commerce/reads.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { freshDatabase, testClock } from "../../test_support.ts";

const newId = monotonicFactory();

Deno.test("listOrders: pages of mixed states merge in date order (newest first, then id), as one list would", async () => {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  try {
    const sql = db.sql;
    const cipher = await openTokenCipher(kv, undefined);
    const brand = await createBrand(
      { sql, newId, now: testClock().now, cipher },
      { name: "B", shop: "b.myshopify.com", beta: true },
    );
    // 120 orders over every state, many sharing a timestamp (the id breaks those ties).
    await sql`
      insert into orders (id, brand_id, external_id, number, state, billing_status, total,
                          currency_code, created_at, synced_at)
      select 'ord_' || lpad(g::text, 4, '0'), ${brand.id}, g::text, '#' || g,
             (${[...ORDER_STATES]}::text[])[1 + (g * 7) % 5], 'complete', 1, 'USD',
             timestamptz '2026-01-01' + ((g * 13) % 40) * interval '1 day', now()
      from generate_series(1, 120) g`;
    const all = await sql<{ external_id: string; state: string }[]>`
      select external_id, state from orders order by created_at desc, id`;
    for (const state of [undefined, "complete", "draft"]) {
      const expected = all.filter((o) => !state || o.state === state).map((o) => o.external_id);
      const seen: string[] = [];
      for (let offset = 0; offset < expected.length; offset += 7) {
        const page = await listOrders(sql, brand.id, { state }, { limit: 7, offset });
        assert.equal(page.total, expected.length);
        seen.push(...page.list.map((o) => o.external_id));
      }
      assert.deepEqual(seen, expected, String(state));
    }
    const window = await listOrders(sql, brand.id, {
      createdAtGte: new Date("2026-01-10T00:00:00Z"),
      createdAtLte: new Date("2026-01-20T00:00:00Z"),
    }, { limit: 500, offset: 0 });
    assert.deepEqual(
      window.list.map((o) => o.external_id),
      (await sql<{ external_id: string }[]>`
        select external_id from orders
        where created_at between '2026-01-10T00:00:00Z' and '2026-01-20T00:00:00Z'
        order by created_at desc, id`).map((o) => o.external_id),
    );
  } finally {
    kv.close();
    await db.close();
  }
});
