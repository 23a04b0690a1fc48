import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { appendChanges } from "../../lib/audiences/changes.ts";
import { privacyErasers } from "../../lib/runtime/runtime.ts";
import { findBrandContext, setBrand } from "../../lib/tenancy/brands.ts";
import { startForwarder } from "../../lib/ingest/forwarder.ts";
import { listDeadLetters, readBacklog } from "../../lib/ingest/queue.ts";
import {
  importWebhookKey,
  pruneWebhookDeliveries,
  signShopifyWebhook,
  WEBHOOK_DELIVERY_RETENTION_MS,
} from "../../lib/shopify/webhooks.ts";
import { shopifyOrder } from "../lib/shopify/shopify_payloads.ts";
import { startPrivacyForwarder } from "../lib/privacy/privacy_support.ts";
import { errorBody, eventually, type TestContext, withContext } from "../test_support.ts";

const SECRET = "shpss_0123456789abcdef0123456789abcdef";
const ENV = { SHOPIFY_API_SECRET: SECRET };

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;

let _deliveryCounter = 0;

/** The signature Shopify sends: base64 HMAC-SHA256 of the raw body bytes with the app secret. */
async function sign(body: string | Uint8Array<ArrayBuffer>, secret = SECRET): Promise<string> {
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  return await signShopifyWebhook(await importWebhookKey(secret), bytes);
}

interface Delivery {
  topic?: string | null;
  shop?: string | null;
  webhookId?: string | null;
  /** An object is serialized; a string is sent as is. */
  body: unknown;
  /** The signature header; computed over the body when undefined, absent when null. */
  hmac?: string | null;
  headers?: Record<string, string>;
}

async function deliver(ctx: TestContext, brand: Brand | string, d: Delivery): Promise<Response> {
  const body = typeof d.body === "string" ? d.body : JSON.stringify(d.body);
  const headers = new Headers({ "Content-Type": "application/json", ...d.headers });
  const set = (name: string, value: string | null | undefined, fallback: string) => {
    if (value !== null) headers.set(name, value ?? fallback);
  };
  set("X-Shopify-Topic", d.topic, "orders/create");
  set(
    "X-Shopify-Shop-Domain",
    d.shop,
    typeof brand === "string" ? brand : brand.scope!,
  );
  set("X-Shopify-Webhook-Id", d.webhookId, `wh-${Deno.pid}-${++_deliveryCounter}`);
  set("X-Shopify-Hmac-Sha256", d.hmac, await sign(body));
  return await ctx.app.request("/webhooks/shopify", { method: "POST", headers, body });
}

/** Waits until the forwarder has completed a privacy request (customers/redact's erase). */
async function completed(ctx: TestContext, brand: Brand, id: string): Promise<void> {
  await eventually(async () => {
    const res = await ctx.request(`/cdp/privacy/requests/${id}`, brand.key);
    return (await res.json()).status === "completed";
  });
}

async function ok(
  res: Response,
): Promise<{ received: true; outcome: string; reason?: string; privacy_request_id?: string }> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}

async function count(ctx: TestContext, table: string, brandId?: string): Promise<number> {
  const [row] = brandId
    ? await ctx.sql.unsafe(`select count(*)::int as n from ${table} where brand_id = $1`, [
      brandId,
    ])
    : await ctx.sql.unsafe(`select count(*)::int as n from ${table}`);
  return row!.n as number;
}

const getOrder = async (ctx: TestContext, brand: Brand, id: string) => {
  const res = await ctx.request(`/cdp/commerce/orders/${id}`, brand.key);
  return { status: res.status, body: await res.json() };
};

const listOrders = async (ctx: TestContext, brand: Brand, query = "") =>
  await (await ctx.request(`/cdp/commerce/orders${query}`, brand.key)).json();

/** An order payload at a given update time. */
const order = (id: number, updatedAt: string, extra: Record<string, unknown> = {}) =>
  shopifyOrder({
    id,
    admin_graphql_api_id: `gid://shopify/Order/${id}`,
    updated_at: updatedAt,
    ...extra,
  });

Deno.test("webhooks: 503 while SHOPIFY_API_SECRET is not configured", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const originalError = console.error;
    console.error = () => {}; // a 5xx is logged
    let res: Response;
    try {
      res = await deliver(ctx, brand, { body: shopifyOrder() });
    } finally {
      console.error = originalError;
    }
    assert.equal(res.status, 503);
    assert.equal((await errorBody(res)).error, "service_unavailable");
    assert.equal(await count(ctx, "orders"), 0);
  });
});

Deno.test("webhooks: a missing, wrong, malformed or other-secret signature is 401 and nothing changes", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const body = JSON.stringify(shopifyOrder());
    const signatures: (string | null)[] = [
      null,
      "",
      "not base64!",
      "AAAA",
      await sign(body, "another secret"),
      (await sign(body)).toLowerCase(),
      btoa("x".repeat(32)),
    ];
    for (const hmac of signatures) {
      for (const topic of ["orders/create", "app/uninstalled", "shop/redact"]) {
        const res = await deliver(ctx, brand, { topic, body, hmac });
        assert.equal(res.status, 401, `${hmac} ${topic}`);
        const error = await errorBody(res);
        assert.equal(error.error, "unauthorized");
      }
    }
    assert.equal(await count(ctx, "orders"), 0);
    assert.equal(await count(ctx, "contacts"), 0);
    assert.equal(await count(ctx, "webhook_deliveries"), 0);
    const context = await findBrandContext(ctx.sql, brand.brandId);
    assert.equal(context?.integration?.status, "connected");
  }, ENV);
});

Deno.test("webhooks: a tampered body (signature of the original) is 401", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const original = JSON.stringify(shopifyOrder());
    const hmac = await sign(original);
    for (
      const tampered of [
        original.replace('"199.99"', '"1.99"'),
        original + " ",
        original.replace("{", "{ "),
      ]
    ) {
      const res = await deliver(ctx, brand, { body: tampered, hmac });
      assert.equal(res.status, 401);
    }
    assert.equal(await count(ctx, "orders"), 0);
    // The untouched original with its signature goes through.
    assert.equal(
      (await ok(await deliver(ctx, brand, { body: original, hmac }))).outcome,
      "applied",
    );
  }, ENV);
});

Deno.test("webhooks: signed but missing headers, a foreign shop domain, bad JSON: 400 and nothing stored", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const body = shopifyOrder();
    for (const missing of ["topic", "shop", "webhookId"] as const) {
      const res = await deliver(ctx, brand, { body, [missing]: null });
      assert.equal(res.status, 400, missing);
      assert.match((await errorBody(res)).error_description, /missing header/);
    }
    const notShopify = await deliver(ctx, brand, { body, shop: "example.com" });
    assert.equal(notShopify.status, 400);
    for (const raw of ["{", "not json", "[1,2]", "null", '"text"', ""]) {
      const res = await deliver(ctx, brand, { body: raw });
      assert.equal(res.status, 400, raw);
      assert.equal((await errorBody(res)).error, "bad_request");
    }
    // Valid JSON that is not an order: 400 naming the fields, no delivery recorded (so a fixed
    // retry would apply).
    const unmappable = await deliver(ctx, brand, { body: { id: 1, name: "#1" } });
    assert.equal(unmappable.status, 400);
    assert.match((await errorBody(unmappable)).error_description, /order\.total/);
    // A privacy payload naming another shop than the header.
    const otherShop = await deliver(ctx, brand, {
      topic: "shop/redact",
      body: { shop_id: 1, shop_domain: "someone-else.myshopify.com" },
    });
    assert.equal(otherShop.status, 400);
    assert.equal(await count(ctx, "orders"), 0);
    assert.equal(await count(ctx, "webhook_deliveries"), 0);
    assert.equal(
      (await findBrandContext(ctx.sql, brand.brandId))?.integration?.status,
      "connected",
    );
  }, ENV);
});

Deno.test("webhooks: GET is 405 with Allow; the route needs no API key and is in the OpenAPI document", async () => {
  await withContext(async (ctx) => {
    const res = await ctx.app.request("/webhooks/shopify");
    assert.equal(res.status, 405);
    assert.equal(res.headers.get("allow"), "POST, OPTIONS");
    assert.equal((await errorBody(res)).error, "method_not_allowed");
    const doc = await (await ctx.app.request("/openapi.json")).json();
    assert.ok(doc.paths["/webhooks/shopify"].post);
    // No credential: an explicit empty requirement (the HMAC is the proof).
    assert.deepEqual(doc.paths["/webhooks/shopify"].post.security, []);
  }, ENV);
});

Deno.test("webhooks: a body over MAX_BODY_BYTES is 413 before the signature is checked", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const body = shopifyOrder({ note: "x".repeat(4096) });
    const res = await deliver(ctx, brand, { body });
    assert.equal(res.status, 413);
    assert.equal((await errorBody(res)).error, "payload_too_large");
  }, { ...ENV, MAX_BODY_BYTES: "2048" });
});

Deno.test("webhooks: an unknown shop is acknowledged and ignored", async () => {
  await withContext(async (ctx) => {
    await ctx.seedBrand();
    for (const topic of ["orders/create", "shop/redact", "app/uninstalled"]) {
      const result = await ok(
        await deliver(ctx, "nobody-here.myshopify.com", { topic, body: shopifyOrder() }),
      );
      assert.deepEqual(result, { received: true, outcome: "ignored", reason: "unknown_shop" });
    }
    assert.equal(await count(ctx, "orders"), 0);
    assert.equal(await count(ctx, "webhook_deliveries"), 0);
  }, ENV);
});

Deno.test("webhooks: an unsupported topic is acknowledged, recorded and ignored", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const result = await ok(
      await deliver(ctx, brand, { topic: "products/update", body: { id: 1 } }),
    );
    assert.deepEqual(result, { received: true, outcome: "ignored", reason: "unsupported_topic" });
    assert.equal(await count(ctx, "webhook_deliveries"), 1);
  }, ENV);
});

Deno.test("webhooks: orders/create stores the mapped order, readable through the commerce routes", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const result = await ok(await deliver(ctx, brand, { body: shopifyOrder() }));
    assert.deepEqual(result, { received: true, outcome: "applied" });
    const { status, body } = await getOrder(ctx, brand, "820982911946154");
    assert.equal(status, 200);
    assert.equal(body.number, "#1001");
    assert.equal(body.state, "complete");
    assert.equal(body.billing_status, "complete");
    assert.equal(body.total, "199.99");
    assert.equal(body.currency_code, "USD");
    assert.equal(body.created_at, "2026-01-02T08:04:05.000Z");
    assert.equal(body.processed_at, "2026-01-02T08:04:06.000Z");
    assert.equal(body.updated_at, "2026-01-02T08:04:07.000Z");
    assert.equal(body.customer.shopify_customer_id, "207119551");
    assert.equal(body.line_items.length, 2);
    assert.deepEqual(body.line_items[0], {
      title: "IPod Nano - 8gb",
      quantity: 2,
      price: "30.00",
      sku: "IPOD2008GREEN",
      product_id: "632910392",
      variant_id: "39072856",
      variant_title: "green",
    });
    const byEmail = await listOrders(ctx, brand, "?customer_email=BOB@example.com");
    assert.deepEqual(byEmail.list.map((o: { number: string }) => o.number), ["#1001"]);
  }, ENV);
});

Deno.test("webhooks: an id past 2^53 is stored with every digit", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const body = JSON.stringify(shopifyOrder()).replace(
      '"id":820982911946154,',
      '"id":820982911946154508,',
    );
    await ok(await deliver(ctx, brand, { body }));
    assert.equal((await getOrder(ctx, brand, "820982911946154508")).status, 200);
  }, ENV);
});

Deno.test("webhooks: each order topic applies, and the latest state wins", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const steps: [string, Record<string, unknown>, string, string][] = [
      ["orders/create", { financial_status: "pending" }, "pending", "billable"],
      ["orders/updated", { financial_status: "authorized" }, "pending", "processing"],
      ["orders/paid", { financial_status: "paid" }, "complete", "complete"],
      [
        "orders/fulfilled",
        { financial_status: "paid", fulfillment_status: "fulfilled" },
        "complete",
        "complete",
      ],
      [
        "orders/cancelled",
        { financial_status: "refunded", cancelled_at: "2026-01-05T00:00:00Z" },
        "cancelled",
        "on_hold",
      ],
    ];
    let minute = 10;
    for (const [topic, extra, state, billing] of steps) {
      const body = order(5001, `2026-01-02T00:${minute++}:00Z`, extra);
      assert.equal((await ok(await deliver(ctx, brand, { topic, body }))).outcome, "applied");
      const stored = (await getOrder(ctx, brand, "5001")).body;
      assert.equal(stored.state, state, topic);
      assert.equal(stored.billing_status, billing, topic);
    }
    assert.equal(await count(ctx, "orders", brand.brandId), 1);
  }, ENV);
});

Deno.test("webhooks: a repeated webhook id is applied once; a new id with the same payload stays idempotent", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const first = order(6001, "2026-01-02T00:00:00Z", { total_price: "10.00" });
    assert.equal(
      (await ok(await deliver(ctx, brand, { webhookId: "dup-1", body: first }))).outcome,
      "applied",
    );
    // Same id again, even carrying other content: acknowledged, not applied.
    const changed = order(6001, "2026-01-03T00:00:00Z", { total_price: "20.00" });
    assert.deepEqual(
      await ok(await deliver(ctx, brand, { webhookId: "dup-1", body: changed })),
      { received: true, outcome: "duplicate" },
    );
    assert.equal((await getOrder(ctx, brand, "6001")).body.total, "10.00");
    // A new id with the first payload: applied again, still one order with its two line items.
    assert.equal(
      (await ok(await deliver(ctx, brand, { webhookId: "dup-2", body: first }))).outcome,
      "applied",
    );
    assert.equal(await count(ctx, "orders", brand.brandId), 1);
    assert.equal(await count(ctx, "contacts", brand.brandId), 1);
    const [items] = await ctx.sql`
      select sum(jsonb_array_length(line_items))::int as n from orders`;
    assert.equal(items!.n, 2);
    assert.equal(await count(ctx, "webhook_deliveries"), 2);
    // The same webhook id from another shop is a replay: refused, nothing stored there.
    const other = await ctx.seedBrand();
    const replay = await deliver(ctx, other, { webhookId: "dup-1", body: first });
    assert.equal(replay.status, 400);
    assert.match((await errorBody(replay)).error_description, /delivered for another shop/);
    assert.equal(await count(ctx, "orders", other.brandId), 0);
  }, ENV);
});

Deno.test("webhooks: concurrent deliveries: one application per webhook id, and the newest version wins", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const body = order(6101, "2026-01-02T00:00:00Z");
    const same = await Promise.all(
      Array.from(
        { length: 5 },
        async () => (await ok(await deliver(ctx, brand, { webhookId: "same-id", body }))).outcome,
      ),
    );
    assert.deepEqual(same.sort(), ["applied", "duplicate", "duplicate", "duplicate", "duplicate"]);
    const versions = Array.from(
      { length: 6 },
      (_, i) => order(6102, `2026-01-02T00:0${i}:00Z`, { total_price: `${i + 1}.00` }),
    );
    await Promise.all(
      versions.reverse().map(async (version) =>
        await ok(await deliver(ctx, brand, { body: version }))
      ),
    );
    const stored = (await getOrder(ctx, brand, "6102")).body;
    assert.equal(stored.total, "6.00");
    assert.equal(stored.updated_at, "2026-01-02T00:05:00.000Z");
    assert.equal(await count(ctx, "orders", brand.brandId), 2);
  }, ENV);
});

Deno.test("webhooks: a delivery whose effect fails leaves no record, so its retry applies", async () => {
  let failing = false;
  const ids = monotonicFactory();
  const newId = () => {
    if (failing) throw new Error("simulated store failure");
    return ids();
  };
  await withContext(
    async (ctx) => {
      const brand = await ctx.seedBrand();
      const body = order(7001, "2026-01-02T00:00:00Z");
      failing = true;
      const originalError = console.error;
      console.error = () => {};
      try {
        const res = await deliver(ctx, brand, {
          webhookId: "retry-1",
          body,
          headers: { "X-Request-Id": "req-1" },
        });
        assert.equal(res.status, 500);
      } finally {
        console.error = originalError;
        failing = false;
      }
      assert.equal(await count(ctx, "webhook_deliveries"), 0);
      assert.equal(await count(ctx, "orders"), 0);
      assert.equal(
        (await ok(await deliver(ctx, brand, { webhookId: "retry-1", body }))).outcome,
        "applied",
      );
      assert.equal((await getOrder(ctx, brand, "7001")).status, 200);
    },
    ENV,
    { newId },
  );
});

Deno.test("webhooks: a stale order update is acknowledged and ignored; a newer one wins", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const cancelled = order(8001, "2026-01-02T10:00:00Z", {
      financial_status: "voided",
      cancelled_at: "2026-01-02T10:00:00Z",
    });
    await ok(await deliver(ctx, brand, { topic: "orders/cancelled", body: cancelled }));
    // orders/paid from before the cancellation arrives late.
    const late = order(8001, "2026-01-02T09:00:00Z", { financial_status: "paid" });
    assert.deepEqual(
      await ok(await deliver(ctx, brand, { topic: "orders/paid", body: late })),
      { received: true, outcome: "stale" },
    );
    assert.equal((await getOrder(ctx, brand, "8001")).body.state, "cancelled");
    assert.equal(await count(ctx, "webhook_deliveries"), 2);
    // The same instant again is applied (a replay of the same version is harmless).
    assert.equal(
      (await ok(await deliver(ctx, brand, { topic: "orders/updated", body: cancelled }))).outcome,
      "applied",
    );
    const newer = order(8001, "2026-01-02T11:00:00-00:30", { financial_status: "paid" });
    assert.equal(
      (await ok(await deliver(ctx, brand, { topic: "orders/updated", body: newer }))).outcome,
      "applied",
    );
    const stored = (await getOrder(ctx, brand, "8001")).body;
    assert.equal(stored.state, "complete");
    assert.equal(stored.updated_at, "2026-01-02T11:30:00.000Z");
  }, ENV);
});

Deno.test("webhooks: customers/create and customers/update upsert the contact; stale updates are ignored", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const customer = (email: string, updatedAt: string) => ({
      id: 207119551,
      email,
      phone: "+1 613 555 1111",
      first_name: "Bob",
      last_name: "Norman",
      updated_at: updatedAt,
    });
    await ok(
      await deliver(ctx, brand, {
        topic: "customers/create",
        body: customer("bob@example.com", "2026-01-01T00:00:00Z"),
      }),
    );
    // An order of that customer (by Shopify id) attaches to the same contact.
    await ok(
      await deliver(ctx, brand, {
        body: order(9001, "2026-01-01T00:00:00Z", {
          customer: { id: 207119551 },
          email: null,
          contact_email: null,
        }),
      }),
    );
    assert.equal(await count(ctx, "contacts", brand.brandId), 1);
    await ok(
      await deliver(ctx, brand, {
        topic: "customers/update",
        body: customer("Robert@Example.com", "2026-01-03T00:00:00Z"),
      }),
    );
    const stale = await ok(
      await deliver(ctx, brand, {
        topic: "customers/update",
        body: customer("old@example.com", "2026-01-02T00:00:00Z"),
      }),
    );
    assert.equal(stale.outcome, "stale");
    const [contact] = await ctx.sql`
      select email, phone, first_name, last_name, shopify_customer_id from contacts
      where brand_id = ${brand.brandId}`;
    assert.deepEqual({ ...contact }, {
      email: "robert@example.com",
      phone: "+16135551111",
      first_name: "Bob",
      last_name: "Norman",
      shopify_customer_id: "207119551",
    });
    const page = await listOrders(ctx, brand, "?customer_email=robert@example.com");
    assert.equal(page.totalSize, 1);
    assert.equal((await listOrders(ctx, brand, "?customer_email=old@example.com")).totalSize, 0);
    // A customer payload without an id does not map.
    const noId = await deliver(ctx, brand, {
      topic: "customers/update",
      body: { email: "x@example.com" },
    });
    assert.equal(noId.status, 400);
  }, ENV);
});

Deno.test("webhooks: subscription contract topics create and update contracts; older revisions are ignored", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const contract = (status: string, revision: number, extra: Record<string, unknown> = {}) => ({
      admin_graphql_api_id: "gid://shopify/SubscriptionContract/5577",
      id: 5577,
      billing_policy: { interval: "month", interval_count: 1 },
      currency_code: "USD",
      customer_id: 207119551,
      admin_graphql_api_customer_id: "gid://shopify/Customer/207119551",
      status,
      revision_id: revision,
      ...extra,
    });
    await ok(
      await deliver(ctx, brand, {
        topic: "subscription_contracts/create",
        body: contract("ACTIVE", 1, { next_billing_date: "2026-02-01T00:00:00Z" }),
      }),
    );
    const get = async () =>
      await (await ctx.request("/cdp/commerce/subscriptions/5577", brand.key)).json();
    let stored = await get();
    assert.equal(stored.status, "active");
    assert.equal(stored.next_billing_date, "2026-02-01T00:00:00.000Z");
    assert.ok(stored.customer.contact_id);
    await ok(
      await deliver(ctx, brand, {
        topic: "subscription_contracts/update",
        body: contract("PAUSED", 3),
      }),
    );
    assert.equal((await get()).status, "paused");
    const stale = await ok(
      await deliver(ctx, brand, {
        topic: "subscription_contracts/update",
        body: contract("CANCELLED", 2),
      }),
    );
    assert.equal(stale.outcome, "stale");
    stored = await get();
    assert.equal(stored.status, "paused");
    const filtered = await (await ctx.request(
      "/cdp/commerce/subscriptions?customer_id=207119551",
      brand.key,
    )).json();
    assert.equal(filtered.totalSize, 1);
    const bad = await deliver(ctx, brand, {
      topic: "subscription_contracts/update",
      body: contract("DORMANT", 4),
    });
    assert.equal(bad.status, 400);
  }, ENV);
});

Deno.test("webhooks: app/uninstalled disconnects the integration, keeps the scope, and stops syncing", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await ok(await deliver(ctx, brand, { body: order(1, "2026-01-01T00:00:00Z") }));
    // The storefront pixel's events are queued (and the door has cached the shop)...
    const pixel = async () => {
      const before = await ctx.queue.backlog();
      const res = await ctx.app.request(`/cdp/ingest?shop=${brand.scope}`, {
        method: "POST",
        headers: { Origin: `https://${brand.scope}` },
        body: JSON.stringify({ events: [{ eventType: "page_viewed", profileId: "anon_1" }] }),
      });
      assert.equal(res.status, 202);
      await res.body?.cancel();
      return (await ctx.queue.backlog()) - before;
    };
    assert.equal(await pixel(), 1);
    const result = await ok(
      await deliver(ctx, brand, {
        topic: "app/uninstalled",
        body: { id: 548380009, name: "Super Toys", myshopify_domain: brand.scope },
      }),
    );
    assert.equal(result.outcome, "applied");
    // ...and dropped from the next request on.
    assert.equal(await pixel(), 0);
    const context = await findBrandContext(ctx.sql, brand.brandId);
    assert.equal(context?.scope, brand.scope);
    assert.equal(context?.integration?.status, "disconnected");
    for (const path of ["/cdp/commerce/orders", "/cdp/commerce/orders/1"]) {
      const res = await ctx.request(path, brand.key);
      assert.equal(res.status, 403);
      assert.equal((await errorBody(res)).error, "integration_not_connected");
    }
    // A late order delivery is acknowledged but not applied.
    const late = await ok(
      await deliver(ctx, brand, { body: order(2, "2026-01-01T00:00:00Z") }),
    );
    assert.deepEqual(late, {
      received: true,
      outcome: "ignored",
      reason: "integration_disconnected",
    });
    assert.equal(await count(ctx, "orders", brand.brandId), 1);
  }, ENV);
});

Deno.test("webhooks: customers/redact erases the customer; the orders stay without personal data", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const bob = { id: 207119551, email: "bob@example.com", phone: "+1 613 555 1111" };
    const ann = { id: 300, email: "ann@example.com", phone: "+44 20 7946 0958" };
    await ok(
      await deliver(ctx, brand, { body: order(11, "2026-01-01T00:00:00Z", { customer: bob }) }),
    );
    // A guest order of Bob's, matched to his contact by email.
    await ok(
      await deliver(ctx, brand, {
        body: order(12, "2026-01-01T00:00:00Z", { customer: null, email: "bob@example.com" }),
      }),
    );
    await ok(
      await deliver(ctx, brand, {
        body: order(13, "2026-01-01T00:00:00Z", { customer: ann, email: "ann@example.com" }),
      }),
    );
    await ok(
      await deliver(ctx, brand, {
        topic: "subscription_contracts/create",
        body: { id: 77, status: "ACTIVE", customer_id: 207119551 },
      }),
    );
    assert.equal(
      (await listOrders(ctx, brand, "?customer_email=bob@example.com")).totalSize,
      2,
    );
    void startPrivacyForwarder(ctx);
    const redact = await ok(
      await deliver(ctx, brand, {
        topic: "customers/redact",
        body: {
          shop_id: 954889,
          shop_domain: brand.scope,
          customer: bob,
          orders_to_redact: [11, 12],
        },
      }),
    );
    assert.equal(redact.outcome, "applied");
    await completed(ctx, brand, redact.privacy_request_id!);
    for (
      const query of [
        "?customer_email=bob@example.com",
        "?customer_id=207119551",
        "?customer_phone=%2B16135551111",
      ]
    ) {
      assert.equal((await listOrders(ctx, brand, query)).totalSize, 0, query);
    }
    // The orders remain, with their totals and line items, attributed to nobody.
    const all = await listOrders(ctx, brand);
    assert.equal(all.totalSize, 3);
    for (const id of ["11", "12"]) {
      const { body } = await getOrder(ctx, brand, id);
      assert.equal(body.total, "199.99");
      assert.equal(body.line_items.length, 2);
      assert.equal(body.customer.contact_id, null);
      assert.equal(body.customer.shopify_customer_id, undefined);
    }
    const personal = await ctx.sql`
      select 1 from contacts where brand_id = ${brand.brandId}
        and (email = 'bob@example.com' or shopify_customer_id = '207119551'
             or phone = '+16135551111')`;
    assert.equal(personal.length, 0);
    // Ann is untouched.
    assert.equal((await listOrders(ctx, brand, "?customer_email=ann@example.com")).totalSize, 1);
    // The subscription stays, without its customer.
    const sub = await (await ctx.request("/cdp/commerce/subscriptions/77", brand.key)).json();
    assert.equal(sub.customer.contact_id, null);
    // A late retry of Bob's order does not bring him back.
    await ok(
      await deliver(ctx, brand, {
        topic: "orders/updated",
        body: order(11, "2026-01-02T00:00:00Z", { customer: bob }),
      }),
    );
    assert.equal(
      (await listOrders(ctx, brand, "?customer_email=bob@example.com")).totalSize,
      0,
    );
    assert.equal((await getOrder(ctx, brand, "11")).body.customer.contact_id, null);
  }, ENV);
});

Deno.test("webhooks: customers/data_request is acknowledged and logged without personal data", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const lines: string[] = [];
    const originalLog = console.log;
    console.log = (line: string) => void lines.push(line);
    try {
      const result = await ok(
        await deliver(ctx, brand, {
          topic: "customers/data_request",
          webhookId: "dr-1",
          body: {
            shop_id: 954889,
            shop_domain: brand.scope,
            orders_requested: [299938, 280263],
            customer: { id: 191167, email: "john@example.com", phone: "555-625-1199" },
            data_request: { id: 9999 },
          },
        }),
      );
      assert.equal(result.outcome, "applied");
      // The merchant downloads the export from the dashboard.
      const request = await ctx.request(
        `/cdp/privacy/requests/${result.privacy_request_id}`,
        brand.key,
      );
      assert.equal((await request.json()).type, "export");
    } finally {
      console.log = originalLog;
    }
    assert.equal(lines.length, 1);
    assert.doesNotMatch(lines[0]!, /john|555-625/);
    assert.deepEqual(JSON.parse(lines[0]!), {
      level: "info",
      message: "shopify customers/data_request",
      shop: brand.scope,
      webhook_id: "dr-1",
      data_request_id: "9999",
      shopify_customer_id: "191167",
      orders_requested: 2,
    });
    assert.equal(await count(ctx, "webhook_deliveries"), 1);
  }, ENV);
});

Deno.test("webhooks: shop/redact deletes that shop's commerce data only and disconnects it", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    for (const [i, brand] of [a, b].entries()) {
      // Each shop's own deliveries: the same signed body is never applied to two shops.
      await ok(
        await deliver(ctx, brand, {
          body: order(21, "2026-01-01T00:00:00Z", {
            order_status_url: `https://${brand.scope}/548380009/orders/abc/authenticate?key=k`,
          }),
        }),
      );
      await ok(
        await deliver(ctx, brand, {
          topic: "subscription_contracts/create",
          body: { id: 31 + i, status: "ACTIVE", customer_id: 207119551 },
        }),
      );
    }
    await ok(
      await deliver(ctx, a, {
        topic: "app/uninstalled",
        body: { id: 1, myshopify_domain: a.scope },
      }),
    );
    const result = await ok(
      await deliver(ctx, a, {
        topic: "shop/redact",
        body: { shop_id: 954889, shop_domain: a.scope },
      }),
    );
    assert.equal(result.outcome, "applied");
    for (const table of ["orders", "contacts", "subscriptions"]) {
      assert.equal(await count(ctx, table, a.brandId), 0, table);
      assert.equal(await count(ctx, table, b.brandId), 1, table);
    }
    const [items] = await ctx.sql`
      select sum(jsonb_array_length(line_items))::int as n from orders`;
    assert.equal(items!.n, 2);
    const context = await findBrandContext(ctx.sql, a.brandId);
    assert.equal(context?.integration?.status, "disconnected");
    assert.equal(context?.scope, a.scope);
    assert.equal((await getOrder(ctx, b, "21")).body.total, "199.99");
  }, ENV);
});

const postEvents = (ctx: TestContext, key: string, profileId: string, query = "") =>
  ctx.request(`/cdp/events${query}`, key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      events: [{
        eventType: "updateProperties",
        profileId,
        properties: { update: { "properties.email": "bob@example.com" } },
      }],
    }),
  });

const storedEvents = async (ctx: TestContext, scope: string) =>
  (await ctx.sql`select count(*)::int as n from events where scope = ${scope}`)[0]!.n as number;

Deno.test("webhooks: after shop/redact the brand writes nothing until an operator reconnects it", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const other = await ctx.seedBrand();
    const scope = brand.scope!;
    // Queued before the erasure, applied after it.
    assert.equal((await postEvents(ctx, brand.key, "store_bob")).status, 202);
    await ok(await deliver(ctx, brand, { topic: "shop/redact", body: { shop_domain: scope } }));

    for (const query of ["", "?sync=true"]) {
      const res = await postEvents(ctx, brand.key, "store_bob", query);
      assert.equal(res.status, 403, query);
      const error = await errorBody(res);
      assert.equal(error.error, "forbidden");
      assert.match(error.error_description, /erased \(shop\/redact\).*reconnect/);
    }
    assert.equal((await ctx.request("/cdp/segments", brand.key)).status, 403);
    // The storefront pixel of the erased shop is answered as an unknown shop's is (the proxy
    // never tells which shops are connected) and its event is dropped, never queued: the dead
    // letters below hold only the event queued before the erasure.
    const pixel = await ctx.request(`/cdp/ingest?shop=${scope}`, null, {
      method: "POST",
      headers: { "Content-Type": "application/json", Origin: `https://${scope}` },
      body: JSON.stringify({ events: [{ eventType: "page_viewed", profileId: "anon_1" }] }),
    });
    assert.equal(pixel.status, 202);
    assert.deepEqual(await pixel.json(), { accepted: 1, rejected: [], scope });
    assert.equal((await postEvents(ctx, other.key, "store_ann")).status, 202);

    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    await eventually(async () => (await readBacklog(ctx.kv)) === 0);
    const letters = await listDeadLetters(ctx.kv, brand.brandId);
    assert.equal(letters.length, 1);
    assert.match(letters[0]!.reason, /: 403 the shop's data was erased \(shop\/redact\)/);
    assert.equal(await storedEvents(ctx, scope), 0);
    assert.equal(
      (await ctx.sql`select count(*)::int as n from profiles where scope = ${scope}`)[0]!.n,
      0,
    );
    assert.equal(await storedEvents(ctx, other.scope!), 1);

    // `admin brand set --brand ID --integration connected` reopens it.
    await setBrand({ sql: ctx.sql, kv: ctx.kv, now: ctx.clock.now }, {
      brandId: brand.brandId,
      integration: "connected",
    });
    const again = await postEvents(ctx, brand.key, "store_bob", "?sync=true");
    assert.equal(again.status, 200, await again.clone().text());
    assert.equal((await again.json()).results[0].ok, true);
    assert.equal(await storedEvents(ctx, scope), 1);
    ctx.kv.close();
    await forwarder;
  }, ENV);
});

const fixture = (name: string) =>
  Deno.readTextFile(new URL(`../fixtures/shopify/${name}.json`, import.meta.url));

Deno.test("webhooks: a delivery replayed into another shop, under its webhook id or a new one, is 400 and changes nothing", async () => {
  await withContext(async (ctx) => {
    const shop = await ctx.seedBrand({ shop: "jsmith.myshopify.com" });
    const victim = await ctx.seedBrand();
    // customers/create carries nothing that names its shop: only the delivery's binding tells.
    const body = await fixture("customers_create");
    const topic = "customers/create";
    assert.equal(
      (await ok(await deliver(ctx, shop, { topic, webhookId: "w-1", body }))).outcome,
      "applied",
    );
    for (const webhookId of ["w-1", "w-2"]) {
      const replay = await deliver(ctx, victim, { topic, webhookId, body });
      assert.equal(replay.status, 400, webhookId);
      assert.match((await errorBody(replay)).error_description, /delivered for another shop/);
    }
    assert.equal(await count(ctx, "contacts", victim.brandId), 0);
    // A webhook id is consumed once globally, whatever the body.
    const otherBody = body.replace("bob@biller.com", "ann@biller.com").replace("0084", "0085");
    const reused = await deliver(ctx, victim, { topic, webhookId: "w-1", body: otherBody });
    assert.equal(reused.status, 400);
    assert.equal(await count(ctx, "contacts", victim.brandId), 0);
    assert.equal(await count(ctx, "webhook_deliveries"), 1);
    // The shop's own retry is a duplicate; its own new id and new bodies still apply.
    assert.equal(
      (await ok(await deliver(ctx, shop, { topic, webhookId: "w-1", body }))).outcome,
      "duplicate",
    );
    assert.equal(
      (await ok(await deliver(ctx, shop, { topic, webhookId: "w-3", body }))).outcome,
      "applied",
    );
    assert.equal(
      (await ok(await deliver(ctx, victim, { topic, webhookId: "w-4", body: otherBody }))).outcome,
      "applied",
    );
    assert.equal(await count(ctx, "contacts", shop.brandId), 1);
    assert.equal(await count(ctx, "contacts", victim.brandId), 1);
  }, ENV);
});

Deno.test("webhooks: an order whose order_status_url is on another *.myshopify.com is 400; a custom domain passes", async () => {
  await withContext(async (ctx) => {
    const shop = await ctx.seedBrand({ shop: "jsmith.myshopify.com" });
    const victim = await ctx.seedBrand();
    const body = await fixture("orders_create");
    // Never delivered to its own shop first: the payload itself names the shop.
    const res = await deliver(ctx, victim, { body });
    assert.equal(res.status, 400);
    assert.match((await errorBody(res)).error_description, /names another shop/);
    assert.equal(await count(ctx, "orders", victim.brandId), 0);
    assert.equal(await count(ctx, "webhook_deliveries"), 0);
    assert.equal((await ok(await deliver(ctx, shop, { body }))).outcome, "applied");
    const custom = body.replace("https://jsmith.myshopify.com/", "https://shop.example.com/")
      .replace("450789469", "450789470");
    assert.equal((await ok(await deliver(ctx, victim, { body: custom }))).outcome, "applied");
    assert.equal(await count(ctx, "orders", victim.brandId), 1);
  }, ENV);
});

/** Engine rows of one profile: the profile, an absorbed alias, a session and events under both. */
async function seedProfile(
  ctx: TestContext,
  scope: string,
  id: string,
  properties: Record<string, unknown>,
): Promise<void> {
  const now = ctx.clock.now();
  await ctx.sql`
    insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
    values (${scope}, ${id}, ${ctx.sql.json(properties as never)}, 'server', ${now}, ${now})`;
  await ctx.sql`
    insert into profile_aliases (scope, alias_id, profile_id, merged_at)
    values (${scope}, ${`${id}-anon`}, ${id}, ${now})`;
  await ctx.sql`
    insert into sessions (scope, item_id, profile_id, first_event_at, last_event_at, event_count)
    values (${scope}, ${`${id}-s1`}, ${id}, ${now}, ${now}, 2)`;
  for (const [n, profileId] of [[1, id], [2, `${id}-anon`]] as const) {
    await ctx.sql`
      insert into events (scope, id, profile_id, session_id, event_type, time_stamp, source,
                          received_at)
      values (${scope}, ${`${id}-e${n}`}, ${profileId}, ${`${id}-s1`}, 'page_viewed', ${now},
              'pixel', ${now})`;
  }
}

async function engineRows(ctx: TestContext, scope: string): Promise<Record<string, string[]>> {
  const ids = async (table: string, column: string) =>
    (await ctx.sql.unsafe(
      `select ${column} as id from ${table} where scope = $1 order by 1`,
      [scope],
    )).map((r) => r.id as string);
  return {
    profiles: await ids("profiles", "item_id"),
    profile_aliases: await ids("profile_aliases", "alias_id"),
    sessions: await ids("sessions", "item_id"),
    events: await ids("events", "id"),
  };
}

Deno.test("webhooks: customers/redact also erases the customer's profiles, aliases, sessions and events", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const other = await ctx.seedBrand();
    const scope = brand.scope!;
    // Matched by Shopify id, by email (case-insensitive) and by phone; Ann is someone else.
    await seedProfile(ctx, scope, "bob", { shopifyCustomerId: "207119551" });
    await seedProfile(ctx, scope, "bob2", { email: "Bob@Example.com" });
    await seedProfile(ctx, scope, "bob3", { phoneNumber: "+16135551111" });
    await seedProfile(ctx, scope, "ann", { email: "ann@example.com", shopifyCustomerId: "300" });
    // The same person in another shop is that shop's data.
    await seedProfile(ctx, other.scope!, "bob", { email: "bob@example.com" });
    void startPrivacyForwarder(ctx);
    const result = await ok(
      await deliver(ctx, brand, {
        topic: "customers/redact",
        body: {
          shop_domain: scope,
          customer: { id: 207119551, email: "bob@example.com", phone: "+1 613 555 1111" },
          orders_to_redact: [],
        },
      }),
    );
    assert.equal(result.outcome, "applied");
    await completed(ctx, brand, result.privacy_request_id!);
    assert.deepEqual(await engineRows(ctx, scope), {
      profiles: ["ann"],
      profile_aliases: ["ann-anon"],
      sessions: ["ann-s1"],
      events: ["ann-e1", "ann-e2"],
    });
    assert.deepEqual(await engineRows(ctx, other.scope!), {
      profiles: ["bob"],
      profile_aliases: ["bob-anon"],
      sessions: ["bob-s1"],
      events: ["bob-e1", "bob-e2"],
    });
    assert.equal((await ctx.request("/cdp/customers/bob@example.com", brand.key)).status, 404);
  }, ENV);
});

Deno.test("webhooks: shop/redact erases the shop's profiles, events, sessions, aliases and segments", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    for (const brand of [a, b]) {
      await seedProfile(ctx, brand.scope!, "p1", { email: "p1@example.com" });
      await ctx.sql`
        insert into segments (scope, id, name, condition, created_at, updated_at)
        values (${brand.scope}, 'vip', 'VIP', '{"type":"matchAllCondition"}', now(), now())`;
      // A privacy request holds an identifier (personal data).
      const res = await ctx.request("/cdp/privacy/requests", brand.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ type: "export", identifier: "p1@example.com" }),
      });
      assert.equal(res.status, 202);
      await res.body?.cancel();
    }
    await ok(
      await deliver(ctx, a, { topic: "shop/redact", body: { shop_domain: a.scope } }),
    );
    // Its requests are gone; the audit (keyed hashes only) stays.
    const requests = await ctx.sql`select brand_id from privacy_requests`;
    assert.deepEqual(requests.map((r) => r.brand_id), [b.brandId]);
    assert.equal(await count(ctx, "privacy_audit", a.brandId), 1);
    assert.deepEqual(await engineRows(ctx, a.scope!), {
      profiles: [],
      profile_aliases: [],
      sessions: [],
      events: [],
    });
    assert.equal((await engineRows(ctx, b.scope!)).events!.length, 2);
    const segments = await ctx.sql`select scope from segments order by scope`;
    assert.deepEqual(segments.map((r) => r.scope), [b.scope]);
  }, ENV);
});

Deno.test("webhooks: delivery records past the retention are pruned as deliveries arrive", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const day = 86_400_000;
    await ok(await deliver(ctx, brand, { topic: "shop/update", webhookId: "old", body: {} }));
    ctx.clock.advance(WEBHOOK_DELIVERY_RETENTION_MS - day);
    await ok(await deliver(ctx, brand, { topic: "shop/update", webhookId: "recent", body: {} }));
    // "old" is a day short of the retention: kept, and a repeat is still a duplicate.
    assert.equal(
      (await ok(await deliver(ctx, brand, { topic: "shop/update", webhookId: "old", body: {} })))
        .outcome,
      "duplicate",
    );
    ctx.clock.advance(day + 1);
    await ok(await deliver(ctx, brand, { topic: "shop/update", webhookId: "new", body: {} }));
    const ids = await ctx.sql`select webhook_id from webhook_deliveries order by webhook_id`;
    assert.deepEqual(ids.map((r) => r.webhook_id), ["new", "recent"]);
  }, ENV);
});

Deno.test("webhooks: pruning is bounded per call, oldest first", async () => {
  await withContext(async (ctx) => {
    const now = ctx.clock.now();
    const old = new Date(now.getTime() - WEBHOOK_DELIVERY_RETENTION_MS - 1);
    await ctx.sql`
      insert into webhook_deliveries (shop_domain, webhook_id, topic, received_at)
      select 'x.myshopify.com', 'w' || lpad(k::text, 3, '0'), 'orders/create',
             ${old}::timestamptz - k * interval '1 second'
      from generate_series(1, 150) k`;
    await ctx.sql`
      insert into webhook_deliveries (shop_domain, webhook_id, topic, received_at)
      values ('x.myshopify.com', 'fresh', 'orders/create', ${now})`;
    assert.equal(await pruneWebhookDeliveries(ctx.sql, now), 100);
    // The oldest (the highest k) went first.
    const [left] = await ctx.sql`
      select count(*)::int as n, max(webhook_id) as newest_old from webhook_deliveries
      where webhook_id <> 'fresh'`;
    assert.deepEqual([left!.n, left!.newest_old], [50, "w050"]);
    assert.equal(await pruneWebhookDeliveries(ctx.sql, now), 50);
    assert.equal(await pruneWebhookDeliveries(ctx.sql, now), 0);
    assert.equal(await count(ctx, "webhook_deliveries"), 1);
  });
});

Deno.test("webhooks: customers/redact's erase takes the person out of every segment; shop/redact erases the membership", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const other = await ctx.seedBrand();
    const scope = brand.scope!;
    await seedProfile(ctx, scope, "bob", { email: "bob@example.com" });
    await seedProfile(ctx, scope, "ann", { email: "ann@example.com" });
    await seedProfile(ctx, other.scope!, "bob", { email: "bob@example.com" });
    const at = ctx.clock.now();
    for (const s of [scope, other.scope!]) {
      await ctx.sql.begin((tx) =>
        appendChanges(
          tx,
          s,
          [["vip", "bob"], ["vip", "ann"], ["buyers", "bob"]].map(([segmentId, profileId]) => ({
            segmentId: segmentId!,
            profileId: profileId!,
            change: "entered" as const,
            at,
          })),
        )
      );
    }
    const membership = async (s: string) => ({
      members: (await ctx.sql<{ m: string }[]>`
        select segment_id || ' ' || profile_id as m from segment_members where scope = ${s}
        order by 1`).map((r) => r.m),
      changes: (await ctx.sql<{ c: string }[]>`
        select change || ' ' || segment_id || ' ' || profile_id as c from segment_changes
        where scope = ${s} order by position`).map((r) => r.c),
    });
    // The erase request the webhook records runs on the forwarder with the runtime's erasers.
    void startPrivacyForwarder(ctx, ctx.queue, {
      erasers: privacyErasers({ now: ctx.clock.now }),
    });
    await ok(
      await deliver(ctx, brand, {
        topic: "customers/redact",
        body: {
          shop_domain: scope,
          customer: { id: 1, email: "bob@example.com" },
          orders_to_redact: [],
        },
      }),
    );
    await eventually(async () =>
      (await ctx.sql<{ status: string }[]>`select status from privacy_requests`)
        .every((r) => r.status === "completed")
    );
    // Bob's history goes; one exit per segment he was in tells the destinations.
    assert.deepEqual(await membership(scope), {
      members: ["vip ann"],
      changes: ["entered vip ann", "exited buyers bob", "exited vip bob"],
    });
    assert.equal((await membership(other.scope!)).members.length, 3, "another shop's bob stays");
    await ok(await deliver(ctx, brand, { topic: "shop/redact", body: { shop_domain: scope } }));
    assert.deepEqual(await membership(scope), { members: [], changes: [] });
    assert.equal((await membership(other.scope!)).changes.length, 3);
  }, ENV);
});
