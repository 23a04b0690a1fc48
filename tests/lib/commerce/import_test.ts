import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { createBrand } from "../../../lib/brands.ts";
import { importNdjson } from "../../../lib/commerce/import.ts";
import {
  OrderLineSchema,
  SubscriptionLineSchema,
  upsertOrders,
  upsertSubscriptions,
} from "../../../lib/commerce/orders.ts";
import type { Sql } from "../../../lib/db.ts";
import { openTokenCipher } from "../../../lib/token_cipher.ts";
import { freshDatabase, testClock } from "../../test_support.ts";

const newId = monotonicFactory();

function stream(text: string, chunk = 7): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(offset, offset += chunk));
    },
  });
}

function order(externalId: string, extra: Record<string, unknown> = {}) {
  return {
    external_id: externalId,
    number: `#${externalId}`,
    state: "complete",
    billing_status: "complete",
    total: "10.00",
    currency_code: "USD",
    created_at: "2026-01-02T03:04:05Z",
    ...extra,
  };
}

async function withBrand(fn: (sql: Sql, brandId: string) => Promise<void>) {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  try {
    const clock = testClock();
    const brand = await createBrand(
      { sql: db.sql, newId, now: clock.now, cipher: await openTokenCipher(kv, undefined) },
      { name: "B", shop: "b.myshopify.com", beta: true },
    );
    await fn(db.sql, brand.id);
  } finally {
    kv.close();
    await db.close();
  }
}

const importOrders = (sql: Sql, brandId: string, text: string) =>
  importNdjson(sql, {
    stream: stream(text),
    schema: OrderLineSchema,
    applyBatch: (tx, lines) =>
      upsertOrders(tx, { brandId, lines, newId, now: new Date("2026-11-21T00:00:00Z") }),
  });

Deno.test("import: lines are applied, bad ones reported with line numbers, blank lines skipped", async () => {
  await withBrand(async (sql, brandId) => {
    const text = [
      JSON.stringify(
        order("1", {
          line_items: [{
            title: "Tee",
            quantity: 2,
            price: "30.00",
            sku: "TEE-M",
            product_id: 632910392,
            variant_id: "808950810",
            variant_title: "M",
          }],
        }),
      ),
      "",
      "{not json",
      JSON.stringify(order("2", { total: "1.234" })),
      JSON.stringify({ external_id: "3" }),
      JSON.stringify(order("4")),
    ].join("\r\n");
    const result = await importOrders(sql, brandId, text);
    assert.equal(result.imported, 2);
    assert.deepEqual(result.rejected.map((r) => r.line), [3, 4, 5]);
    assert.deepEqual(result.rejected[0]!.errors, ["not valid JSON"]);
    assert.match(result.rejected[1]!.errors[0]!, /^total:/);
    assert.ok(result.rejected[2]!.errors.some((e) => e.startsWith("number:")));
    const items = await sql`select title, quantity, price::text, product_id from order_line_items`;
    assert.deepEqual([...items], [{
      title: "Tee",
      quantity: 2,
      price: "30.00",
      product_id: "632910392",
    }]);
  });
});

Deno.test("import: re-importing an external id replaces the order (idempotent)", async () => {
  await withBrand(async (sql, brandId) => {
    await importOrders(
      sql,
      brandId,
      JSON.stringify(
        order("1", {
          line_items: [{ title: "A", quantity: 1, price: "1.00" }, {
            title: "B",
            quantity: 1,
            price: "2.00",
          }],
        }),
      ),
    );
    await importOrders(
      sql,
      brandId,
      JSON.stringify(
        order("1", {
          state: "cancelled",
          total: "0.00",
          line_items: [{ title: "C", quantity: 3, price: "3.00" }],
        }),
      ),
    );
    await importOrders(
      sql,
      brandId,
      JSON.stringify(
        order("1", {
          state: "cancelled",
          total: "0.00",
          line_items: [{ title: "C", quantity: 3, price: "3.00" }],
        }),
      ),
    );
    const rows = await sql`select state, total::text from orders`;
    assert.deepEqual([...rows], [{ state: "cancelled", total: "0.00" }]);
    const items = await sql`select title from order_line_items`;
    assert.deepEqual(items.map((r) => r.title), ["C"]);
  });
});

Deno.test("import: contacts match by Shopify id, then email, then E.164 phone", async () => {
  await withBrand(async (sql, brandId) => {
    const lines = [
      order("1", {
        customer: { shopify_customer_id: "207119551", email: "Bob@Example.com", first_name: "Bob" },
      }),
      order("2", { customer: { email: " bob@example.com ", phone: "+1 613 555 1111" } }),
      order("3", { customer: { phone: "+1-613-555-1111", last_name: "Norman" } }),
      order("4", { customer: { shopify_customer_id: 207119551 } }),
      order("5", { customer: { email: "ann@example.com" } }),
      order("6", { customer: { first_name: "Nobody" } }),
      order("7"),
    ];
    const result = await importOrders(sql, brandId, lines.map((l) => JSON.stringify(l)).join("\n"));
    assert.equal(result.imported, 7);
    const contacts = await sql`
      select shopify_customer_id, email, phone, first_name, last_name from contacts order by created_at`;
    assert.deepEqual([...contacts], [
      {
        shopify_customer_id: "207119551",
        email: "bob@example.com",
        phone: "+16135551111",
        first_name: "Bob",
        last_name: "Norman",
      },
      {
        shopify_customer_id: null,
        email: "ann@example.com",
        phone: null,
        first_name: null,
        last_name: null,
      },
    ]);
    const [{ n }] =
      (await sql`select count(distinct contact_id)::int as n from orders where external_id in ('1','2','3','4')`) as unknown as [
        { n: number },
      ];
    assert.equal(n, 1);
    const unattributed =
      await sql`select external_id from orders where contact_id is null order by external_id`;
    assert.deepEqual(unattributed.map((r) => r.external_id), ["6", "7"]);
  });
});

Deno.test("import: a line whose write fails is reported; the rest of its batch lands", async () => {
  await withBrand(async (sql, brandId) => {
    // A database-side refusal of one line (here a check constraint) must not sink its batch.
    await sql`alter table orders add constraint small_totals check (total < 1000)`;
    const lines = [order("1"), order("2", { total: "5000.00" }), order("3")];
    const result = await importOrders(sql, brandId, lines.map((l) => JSON.stringify(l)).join("\n"));
    assert.equal(result.imported, 2);
    assert.equal(result.rejected.length, 1);
    assert.equal(result.rejected[0]!.line, 2);
    assert.match(result.rejected[0]!.errors[0]!, /small_totals/);
    const rows = await sql`select external_id from orders order by external_id`;
    assert.deepEqual(rows.map((r) => r.external_id), ["1", "3"]);
  });
});

Deno.test("import: across several batches, rejections are listed in line order and the rest lands", async () => {
  await withBrand(async (sql, brandId) => {
    await sql`alter table orders add constraint small_totals check (total < 1000)`;
    // 4,500 lines: three batches; a write failure in the first batch is found after the parse
    // failures of the second batch are, and is still listed first.
    const lines = Array.from({ length: 4500 }, (_, i) => JSON.stringify(order(String(i + 1))));
    lines[2999] = "{not json";
    lines[9] = JSON.stringify(order("10", { total: "5000.00" }));
    lines[4499] = JSON.stringify(order("4500", { state: "lost" }));
    const result = await importOrders(sql, brandId, lines.join("\n"));
    assert.equal(result.imported, 4497);
    assert.deepEqual(result.rejected.map((r) => r.line), [10, 3000, 4500]);
    const [row] = await sql`select count(*)::int as n from orders where brand_id = ${brandId}`;
    assert.equal(row!.n, 4497);
  });
});

Deno.test("import: subscriptions are upserted by external id with their contact", async () => {
  await withBrand(async (sql, brandId) => {
    const lines = [
      {
        external_id: "s1",
        status: "active",
        next_billing_date: "2026-12-01T00:00:00Z",
        customer: { email: "bob@example.com" },
      },
      {
        external_id: "s2",
        status: "paused",
        next_billing_date: null,
        customer: { email: "BOB@example.com" },
      },
      {
        external_id: "s1",
        status: "cancelled",
        next_billing_date: null,
        customer: { email: "bob@example.com" },
      },
      { external_id: "s3", status: "late" },
    ];
    const result = await importNdjson(sql, {
      stream: stream(lines.map((l) => JSON.stringify(l)).join("\n")),
      schema: SubscriptionLineSchema,
      applyBatch: (tx, lines) =>
        upsertSubscriptions(tx, { brandId, lines, newId, now: new Date() }),
    });
    assert.equal(result.imported, 3);
    assert.deepEqual(result.rejected.map((r) => r.line), [4]);
    const rows = await sql`select external_id, status from subscriptions order by external_id`;
    assert.deepEqual([...rows], [{ external_id: "s1", status: "cancelled" }, {
      external_id: "s2",
      status: "paused",
    }]);
    const [{ n }] =
      (await sql`select count(distinct contact_id)::int as n from subscriptions`) as unknown as [
        { n: number },
      ];
    assert.equal(n, 1);
  });
});

Deno.test("import: within one batch, one new customer is one contact and the last line of an id wins", async () => {
  await withBrand(async (sql, brandId) => {
    const lines = [
      order("1", { customer: { email: "new@example.com" } }),
      order("2", { customer: { email: "NEW@example.com", phone: "+1 613 555 2222" } }),
      order("3", { customer: { phone: "+16135552222", shopify_customer_id: "77" } }),
      order("1", { total: "99.00", customer: { shopify_customer_id: "77" } }),
    ];
    const result = await importOrders(sql, brandId, lines.map((l) => JSON.stringify(l)).join("\n"));
    assert.equal(result.imported, 4);
    const contacts = await sql`select shopify_customer_id, email, phone from contacts`;
    assert.deepEqual([...contacts], [{
      shopify_customer_id: "77",
      email: "new@example.com",
      phone: "+16135552222",
    }]);
    const orders = await sql`select external_id, total::text from orders order by external_id`;
    assert.deepEqual([...orders], [
      { external_id: "1", total: "99.00" },
      { external_id: "2", total: "10.00" },
      { external_id: "3", total: "10.00" },
    ]);
  });
});
