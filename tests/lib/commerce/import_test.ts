import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { createBrand } from "../../../lib/tenancy/brands.ts";
import { importNdjson } from "../../../lib/commerce/import.ts";
import { orderImport, storedOrdersQuery } from "../../../lib/commerce/orders.ts";
import { subscriptionImport } from "../../../lib/commerce/subscriptions.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { DATABASE_URL, freshDatabase, testClock } from "../../test_support.ts";

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

const importOrders = (
  sql: Sql,
  brandId: string,
  text: string,
  options?: { writers?: number; batchLines?: number },
) =>
  importNdjson(
    sql,
    stream(text),
    // On a PostgreSQL server, as `orders import` does there, new orders go in by COPY.
    orderImport({ brandId, newId, now: new Date("2026-11-21T00:00:00Z"), copy: !!DATABASE_URL }),
    options,
  );

Deno.test("import: orders keep every character of their text, COPY's special ones included", async () => {
  await withBrand(async (sql, brandId) => {
    const odd = 'tab\tnew\nline\r\\N back\\slash "quoted" é 😀';
    const lines = [1, 2, 3].map((n) =>
      order(`${odd}${n}`, {
        number: `${odd}#${n}`,
        line_items: [{
          title: odd,
          quantity: n,
          price: "1.50",
          sku: odd,
          product_id: null,
          variant_id: "\\",
          variant_title: "\\N",
        }],
      })
    );
    const result = await importOrders(sql, brandId, lines.map((l) => JSON.stringify(l)).join("\n"));
    assert.deepEqual(result, { imported: 3, rejected: [] });
    const rows = await sql`select external_id, number, line_items from orders order by number`;
    assert.deepEqual(
      rows.map((r) => [r.external_id, r.number, r.line_items]),
      [1, 2, 3].map((n) => [
        `${odd}${n}`,
        `${odd}#${n}`,
        [{
          title: odd,
          quantity: n,
          price: "1.50",
          sku: odd,
          product_id: null,
          variant_id: "\\",
          variant_title: "\\N",
        }],
      ]),
    );
  });
});

Deno.test("import: a later batch naming a known customer updates its one contact; a failed batch's contacts are not remembered", async () => {
  await withBrand(async (sql, brandId) => {
    await sql`alter table contacts add constraint no_blocked check (email <> 'blocked@example.com')`;
    const lines = [
      // Batch 1 fails as a whole (line 2's contact is refused) and is retried line by line.
      order("1", { customer: { shopify_customer_id: "7", email: "ann@example.com" } }),
      order("2", { customer: { email: "blocked@example.com" } }),
      // Batch 2 names customer 7 again, with a first name and a new email.
      order("3", { customer: { shopify_customer_id: "7", first_name: "Ann" } }),
      order("4", { customer: { shopify_customer_id: "7", email: "ann@new.example" } }),
      // Batch 3 names it again, unchanged.
      order("5", { customer: { shopify_customer_id: "7" } }),
    ];
    const result = await importOrders(
      sql,
      brandId,
      lines.map((l) => JSON.stringify(l)).join("\n"),
      { batchLines: 2 },
    );
    assert.equal(result.imported, 4);
    assert.deepEqual(result.rejected.map((r) => r.line), [2]);
    const contacts = await sql`select id, shopify_customer_id, email, first_name from contacts`;
    assert.equal(contacts.length, 1);
    assert.deepEqual(
      { ...contacts[0], id: undefined },
      { id: undefined, shopify_customer_id: "7", email: "ann@new.example", first_name: "Ann" },
    );
    const orders = await sql`select external_id, contact_id from orders order by external_id`;
    assert.deepEqual(
      orders.map((r) => [r.external_id, r.contact_id]),
      ["1", "3", "4", "5"].map((id) => [id, contacts[0]!.id]),
    );
  });
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
    const [stored] = await sql`select line_items from orders`;
    assert.deepEqual(stored!.line_items, [{
      title: "Tee",
      quantity: 2,
      price: "30.00",
      sku: "TEE-M",
      product_id: "632910392",
      variant_id: "808950810",
      variant_title: "M",
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
    const [stored] = await sql`select line_items from orders`;
    assert.deepEqual(stored!.line_items.map((item: { title: string }) => item.title), ["C"]);
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

Deno.test("import: the stored-order probe uses the (brand, external id) key on a brand the statistics think empty", async () => {
  await withBrand(async (sql, brandId) => {
    // Statistics taken while the brand had no orders (another brand has), then the brand's
    // orders: what the planner sees of a brand during its first import.
    await sql`insert into brands (id, name) values ('brand_other', 'other')`;
    const insert = (brand: string) =>
      sql`
        insert into orders (id, brand_id, external_id, number, state, billing_status, total,
                            currency_code, created_at, synced_at)
        select ${brand} || g, ${brand}, g::text, '#' || g, 'complete', 'complete', 1, 'USD',
               now() - g * interval '1 hour', now()
        from generate_series(1, 3000) g`;
    await insert("brand_other");
    await sql`analyze orders`;
    await insert(brandId);
    const plan = await sql`explain ${storedOrdersQuery(sql, brandId, ["1", "2"])}`;
    const text = plan.map((line) => Object.values(line)[0]).join("\n");
    assert.match(text, /orders_brand_id_external_id_key/, text);
    assert.deepEqual(
      (await storedOrdersQuery(sql, brandId, ["2", "3001", "1"])).map((o) => o.external_id).sort(),
      ["1", "2"],
    );
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
    const result = await importNdjson(
      sql,
      stream(lines.map((l) => JSON.stringify(l)).join("\n")),
      subscriptionImport({ brandId, newId, now: new Date() }),
    );
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

Deno.test("import: batches written at once keep file order for each external id", async () => {
  await withBrand(async (sql, brandId) => {
    // 40 batches of 3 lines, 4 writers: order k is named in batches k and k + 1, with a larger
    // total each time, and order "x" in every batch; the last line of each must win.
    const lines = [];
    for (let b = 0; b < 40; b++) {
      lines.push(order(String(b), { total: `${b}.01` }));
      lines.push(order(String(b - 1), { total: `${b}.02` }));
      lines.push(order("x", { total: `${b}.03` }));
    }
    const result = await importOrders(
      sql,
      brandId,
      lines.map((l) => JSON.stringify(l)).join("\n"),
      { writers: 4, batchLines: 3 },
    );
    assert.deepEqual(result, { imported: 120, rejected: [] });
    const rows = await sql`select external_id, total::text from orders order by external_id`;
    const expected = new Map<string, string>([["x", "39.03"], ["39", "39.01"]]);
    for (let b = -1; b < 39; b++) expected.set(String(b), `${b + 1}.02`);
    assert.deepEqual(
      new Map(rows.map((r) => [r.external_id as string, r.total as string])),
      expected,
    );
  });
});

Deno.test("import: a line whose contact the database refuses is reported; its order is not written", async () => {
  await withBrand(async (sql, brandId) => {
    await sql`alter table contacts add constraint no_blocked check (email <> 'blocked@example.com')`;
    const lines = [
      order("1", { customer: { email: "ann@example.com" } }),
      order("2", { customer: { email: "blocked@example.com" } }),
      order("3", { customer: { email: "ann@example.com" } }),
    ];
    const result = await importOrders(sql, brandId, lines.map((l) => JSON.stringify(l)).join("\n"));
    assert.equal(result.imported, 2);
    assert.deepEqual(result.rejected.map((r) => r.line), [2]);
    assert.match(result.rejected[0]!.errors[0]!, /no_blocked/);
    const rows = await sql`select external_id, contact_id is not null as attributed from orders
                           order by external_id`;
    assert.deepEqual([...rows], [
      { external_id: "1", attributed: true },
      { external_id: "3", attributed: true },
    ]);
    const contacts = await sql`select email from contacts`;
    assert.deepEqual(contacts.map((r) => r.email), ["ann@example.com"]);
  });
});

Deno.test("import: a known Shopify id wins over another contact's email; an unknown one matches by email, oldest first", async () => {
  await withBrand(async (sql, brandId) => {
    const first = [
      order("1", { customer: { shopify_customer_id: "1", email: "one@example.com" } }),
      order("2", { customer: { email: "shared@example.com", first_name: "Older" } }),
    ];
    await importOrders(sql, brandId, first.map((l) => JSON.stringify(l)).join("\n"));
    const second = [
      order("3", { customer: { email: "shared@example.com", first_name: "Newer" } }),
    ];
    await importOrders(sql, brandId, second.map((l) => JSON.stringify(l)).join("\n"));
    // A contact created directly (a webhook, say) with the same email, later than "Older".
    await sql`insert into contacts (id, brand_id, email, first_name, created_at, updated_at)
              values (gen_random_uuid(), ${brandId}, 'shared@example.com', 'Later',
                      now() + interval '1 day', now())`;
    const third = [
      // Known Shopify id 1: stays with its contact although its email is "shared"'s.
      order("4", { customer: { shopify_customer_id: "1", email: "shared@example.com" } }),
      // Unknown Shopify id 2: the oldest contact with that email gets it.
      order("5", { customer: { shopify_customer_id: "2", email: "shared@example.com" } }),
    ];
    const result = await importOrders(
      sql,
      brandId,
      third.map((l) => JSON.stringify(l)).join("\n"),
    );
    assert.equal(result.imported, 2);
    const owners = await sql`
      select o.external_id, c.shopify_customer_id, c.first_name
      from orders o join contacts c on c.id = o.contact_id order by o.external_id`;
    assert.deepEqual([...owners], [
      { external_id: "1", shopify_customer_id: "1", first_name: null },
      { external_id: "2", shopify_customer_id: "2", first_name: "Newer" },
      { external_id: "3", shopify_customer_id: "2", first_name: "Newer" },
      { external_id: "4", shopify_customer_id: "1", first_name: null },
      { external_id: "5", shopify_customer_id: "2", first_name: "Newer" },
    ]);
  });
});

Deno.test("import: a stream that fails mid-file rejects once what it had read is written", async () => {
  await withBrand(async (sql, brandId) => {
    const lines = Array.from({ length: 9 }, (_, i) => JSON.stringify(order(String(i + 1))));
    let sent = false;
    const failing = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) return controller.error(new Error("the client went away"));
        controller.enqueue(new TextEncoder().encode(lines.join("\n") + "\n"));
        sent = true;
      },
    });
    await assert.rejects(
      importNdjson(
        sql,
        failing,
        orderImport({ brandId, newId, now: new Date("2026-11-21T00:00:00Z") }),
        { writers: 2, batchLines: 2 },
      ),
      /the client went away/,
    );
    // Every full batch read before the failure is written by then, and nothing after.
    const count = async () =>
      (await sql`select count(*)::int as n from orders where brand_id = ${brandId}`)[0]!.n;
    assert.equal(await count(), 8);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(await count(), 8);
  });
});

Deno.test("import: every field an order line and a subscription line accept is stored as sent", async () => {
  await withBrand(async (sql, brandId) => {
    const customer = {
      shopify_customer_id: "207119551",
      email: "bob@example.com",
      phone: "+16135551111",
      first_name: "Bob",
      last_name: "Norman",
    };
    const line = order("820982911946154508", {
      number: "#1001",
      state: "delivered",
      billing_status: "processing",
      total: "199.99",
      currency_code: "CAD",
      created_at: "2026-01-02T03:04:05Z",
      processed_at: "2026-01-02T04:00:00Z",
      updated_at: "2026-01-03T05:00:00Z",
      recovered_at: "2026-01-02T03:30:00Z",
      customer,
      line_items: [{
        title: "Tee",
        quantity: 2,
        price: "30.00",
        sku: "TEE-M",
        product_id: "632910392",
        variant_id: "808950810",
        variant_title: "M",
      }],
    });
    assert.deepEqual(await importOrders(sql, brandId, JSON.stringify(line)), {
      imported: 1,
      rejected: [],
    });
    const [stored] = await sql`
      select o.external_id, o.number, o.state, o.billing_status, o.total::text as total,
             o.currency_code, o.created_at, o.processed_at, o.updated_at, o.recovered_at,
             o.line_items, c.shopify_customer_id, c.email, c.phone, c.first_name, c.last_name
      from orders o join contacts c on c.id = o.contact_id`;
    const iso = (d: Date) => d.toISOString().replace(".000Z", "Z");
    assert.deepEqual({
      external_id: stored!.external_id,
      number: stored!.number,
      state: stored!.state,
      billing_status: stored!.billing_status,
      total: stored!.total,
      currency_code: stored!.currency_code,
      created_at: iso(stored!.created_at),
      processed_at: iso(stored!.processed_at),
      updated_at: iso(stored!.updated_at),
      recovered_at: iso(stored!.recovered_at),
      customer: {
        shopify_customer_id: stored!.shopify_customer_id,
        email: stored!.email,
        phone: stored!.phone,
        first_name: stored!.first_name,
        last_name: stored!.last_name,
      },
      line_items: stored!.line_items,
    }, line);

    const subscription = {
      external_id: "sub_1",
      status: "paused",
      next_billing_date: "2026-02-01T00:00:00Z",
      customer,
    };
    const result = await importNdjson(
      sql,
      stream(JSON.stringify(subscription)),
      subscriptionImport({ brandId, newId, now: new Date("2026-11-21T00:00:00Z") }),
    );
    assert.deepEqual(result, { imported: 1, rejected: [] });
    const [sub] = await sql`
      select s.external_id, s.status, s.next_billing_date, c.shopify_customer_id
      from subscriptions s join contacts c on c.id = s.contact_id`;
    assert.deepEqual(
      [sub!.external_id, sub!.status, iso(sub!.next_billing_date), sub!.shopify_customer_id],
      ["sub_1", "paused", "2026-02-01T00:00:00Z", "207119551"],
    );
  });
});

Deno.test("import: a line older than the stored order is skipped; an absent recovered_at keeps the stored one", async () => {
  await withBrand(async (sql, brandId) => {
    const line = (id: string, updatedAt: string, total: string, extra = {}) =>
      JSON.stringify(order(id, { updated_at: updatedAt, total, ...extra }));
    await importOrders(
      sql,
      brandId,
      [
        line("1", "2026-02-01T00:00:00Z", "10.00", { recovered_at: "2026-01-05T00:00:00Z" }),
        line("2", "2026-02-01T00:00:00Z", "20.00"),
      ].join("\n"),
    );
    const result = await importOrders(
      sql,
      brandId,
      [line("1", "2026-03-01T00:00:00Z", "11.00"), line("2", "2026-01-01T00:00:00Z", "22.00")]
        .join("\n"),
    );
    // Both lines are accepted; the stale one writes nothing.
    assert.deepEqual(result, { imported: 2, rejected: [] });
    const rows = await sql`
      select external_id, total::text as total, recovered_at from orders
      where brand_id = ${brandId} order by external_id`;
    assert.deepEqual(rows.map((r) => [r.external_id, r.total, r.recovered_at?.toISOString()]), [
      ["1", "11.00", "2026-01-05T00:00:00.000Z"],
      ["2", "20.00", undefined],
    ]);
  });
});
