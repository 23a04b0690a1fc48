import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { OrderLineSchema, SubscriptionLineSchema } from "../../lib/commerce/order_lines.ts";
import { upsertOrder } from "../../lib/commerce/orders.ts";
import { upsertSubscription } from "../../lib/commerce/subscriptions.ts";
import { RFM_TIER_MAP, rfmTier } from "../../lib/commerce/insights.ts";
import { DATABASE_URL, errorBody, type TestContext, withContext } from "../test_support.ts";
import { slowSegments } from "../fixtures/slow_patterns.ts";

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;
const newId = monotonicFactory();

const bob = {
  shopify_customer_id: "207119551",
  email: "bob@example.com",
  phone: "+1 613 555 1111",
};
const ann = { email: "ann@example.com" };
const cy = { shopify_customer_id: "333" };

const item = (product_id: string, quantity: number, price: string) => ({
  title: `Product ${product_id}`,
  quantity,
  price,
  product_id,
});
const order = (
  id: string,
  created_at: string,
  total: string,
  extra: Record<string, unknown> = {},
) => ({
  external_id: id,
  number: `#${id}`,
  state: "complete",
  billing_status: "complete",
  total,
  currency_code: "USD",
  created_at,
  ...extra,
});

async function load(ctx: TestContext, brand: Brand, lines: Record<string, unknown>[]) {
  await ctx.sql.begin(async (tx) => {
    for (const raw of lines) {
      await upsertOrder(tx as never, {
        brandId: brand.brandId,
        line: OrderLineSchema.parse(raw),
        newId,
        now: ctx.clock.now(),
      });
    }
  });
}

/** The fixture of the documented insights example (clock: 2026-11-21T12:00:00Z). */
async function seed(ctx: TestContext) {
  const a = await ctx.seedBrand();
  const b = await ctx.seedBrand();
  await load(ctx, a, [
    order("1", "2026-01-01T00:00:00Z", "100.10", {
      customer: bob,
      line_items: [item("P1", 2, "30.00"), item("P2", 1, "40.10")],
    }),
    order("2", "2026-01-31T00:00:00Z", "50.00", {
      customer: bob,
      line_items: [item("P1", 1, "50.00")],
    }),
    order("3", "2026-03-02T00:00:00Z", "0.01", {
      customer: bob,
      line_items: [item("P3", 1, "0.01")],
    }),
    order("4", "2026-04-01T00:00:00Z", "999.00", {
      customer: bob,
      state: "cancelled",
      line_items: [item("P9", 1, "999.00")],
    }),
    order("5", "2026-02-15T00:00:00Z", "300.00", {
      customer: ann,
      line_items: [item("P2", 3, "100.00")],
    }),
    order("6", "2026-01-10T00:00:00Z", "600.00", { customer: cy }),
    order("7", "2026-01-20T00:00:00Z", "600.00", { customer: cy }),
    order("8", "2026-05-01T00:00:00Z", "1000.00", { line_items: [item("P4", 1, "1000.00")] }),
  ]);
  await load(ctx, b, [
    order("1", "2026-06-01T00:00:00Z", "5000.00", {
      customer: bob,
      line_items: [item("P1", 100, "50.00")],
    }),
  ]);
  await ctx.sql.begin(async (tx) => {
    for (
      const raw of [
        {
          external_id: "s1",
          status: "active",
          next_billing_date: "2026-12-05T00:00:00Z",
          customer: bob,
        },
        {
          external_id: "s2",
          status: "active",
          next_billing_date: "2026-12-01T00:00:00Z",
          customer: bob,
        },
        { external_id: "s3", status: "cancelled", customer: bob },
      ]
    ) {
      await upsertSubscription(tx as never, {
        brandId: a.brandId,
        line: SubscriptionLineSchema.parse(raw),
        newId,
        now: ctx.clock.now(),
      });
    }
  });
  await ctx.deps.engine.applyEvents({
    scope: a.scope!,
    source: "server",
    receivedAt: ctx.clock.now().toISOString(),
    events: [
      {
        id: newId(),
        eventType: "updateProperties",
        profileId: "store_a_207119551",
        properties: {
          update: {
            "properties.email": "Bob@Example.com",
            "properties.shopifyCustomerId": "207119551",
            "properties.firstName": "Bob",
          },
        },
      },
      { id: newId(), eventType: "page_viewed", profileId: "anon_9", sessionId: "w1" },
    ],
  });
  const [annContact] = await ctx
    .sql`select id from contacts where brand_id = ${a.brandId} and email = 'ann@example.com'`;
  return { a, b, annContact: annContact!.id as string };
}

const get = async (ctx: TestContext, key: string, path: string) => {
  const res = await ctx.request(path, key);
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  return await res.json();
};

Deno.test("customers: identifiers resolve by shape; the profile takes precedence; matched_by says how", async () => {
  await withContext(async (ctx) => {
    const { a, annContact } = await seed(ctx);
    const byEmail = await get(ctx, a.key, "/cdp/customers/BOB@example.com");
    assert.equal(byEmail.matched_by, "email");
    assert.equal(byEmail.profile.id, "store_a_207119551");
    assert.equal(byEmail.scope, a.scope);
    assert.equal(
      (await get(ctx, a.key, "/cdp/customers/207119551")).matched_by,
      "shopify_customer_id",
    );
    assert.equal(
      (await get(ctx, a.key, `/cdp/customers/${encodeURIComponent("+1 613 555 1111")}`)).matched_by,
      "phone",
    );
    const byProfile = await get(ctx, a.key, "/cdp/customers/store_a_207119551");
    assert.equal(byProfile.matched_by, "shopify_customer_id");
    assert.deepEqual(byProfile.profile.identity, {
      email: "Bob@Example.com",
      firstName: "Bob",
      shopDomain: a.scope,
      shopifyCustomerId: "207119551",
    });
    assert.equal(byProfile.profile.behavior.nb_of_visits, 1);
    // A profile with no commerce contact.
    const anonymous = await get(ctx, a.key, "/cdp/customers/anon_9");
    assert.equal(anonymous.matched_by, "none");
    assert.equal(anonymous.commerce, null);
    assert.deepEqual(anonymous.subscription, {
      status: "none",
      active_count: 0,
      total_count: 0,
      next_billing_date: null,
    });
    // A contact with orders and no profile, by its contact id (a UUID).
    const byContact = await get(ctx, a.key, `/cdp/customers/${annContact}`);
    assert.equal(byContact.profile, null);
    assert.equal(byContact.matched_by, "contact_id");
    assert.equal(byContact.commerce.total_spend, "300.00");
  });
});

Deno.test("customers: the record's commerce, integrations and subscription summary", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const record = await get(ctx, a.key, "/cdp/customers/bob@example.com");
    assert.deepEqual(record.commerce, {
      total_spend: "150.11",
      currency_code: "USD",
      order_count: 3,
      aov: "50.04",
      first_order_at: "2026-01-01T00:00:00.000Z",
      last_order_at: "2026-03-02T00:00:00.000Z",
    });
    assert.deepEqual(record.subscription, {
      status: "active",
      active_count: 2,
      total_count: 3,
      next_billing_date: "2026-12-01T00:00:00.000Z",
    });
    assert.equal(record.integrations.length, 1);
    assert.deepEqual(Object.keys(record.integrations[0]).sort(), [
      "connected_at",
      "id",
      "integration_id",
      "is_enabled",
      "status",
    ]);
    assert.match(record.integrations[0].integration_id, /^[0-9a-f-]{36}$/);
    assert.deepEqual(record.profile.segments, []);
  });
});

Deno.test("customers: unknown or another brand's customer is 404; gates apply", async () => {
  await withContext(async (ctx) => {
    const { a, b, annContact } = await seed(ctx);
    for (
      const id of [
        "nobody@example.com",
        "999999",
        "+44 20 7946 0958",
        "no_such_profile",
        annContact,
      ]
    ) {
      const res = await ctx.request(`/cdp/customers/${encodeURIComponent(id)}`, b.key);
      assert.equal(res.status, 404, id);
      assert.deepEqual(await errorBody(res), {
        error: "not_found",
        error_description: "Customer not found",
      });
    }
    // B's bob is B's own: B sees 5000.00, never A's orders.
    assert.equal(
      (await get(ctx, b.key, "/cdp/customers/207119551")).commerce.total_spend,
      "5000.00",
    );
    const noBeta = await ctx.seedBrand({ beta: false });
    assert.equal(
      (await errorBody(await ctx.request("/cdp/customers/x", noBeta.key))).error,
      "beta_not_enabled",
    );
    assert.equal((await ctx.request("/cdp/customers/bob@example.com/orders", a.key)).status, 200);
  });
});

Deno.test("customer orders: every state, newest first; a profile without a contact is an empty page", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const page = await get(ctx, a.key, "/cdp/customers/207119551/orders");
    assert.deepEqual(page.list.map((o: { external_id: string }) => o.external_id), [
      "4",
      "3",
      "2",
      "1",
    ]);
    assert.equal(page.totalSize, 4);
    // limit is clamped to 100, as the contract says.
    assert.equal(
      (await get(ctx, a.key, "/cdp/customers/207119551/orders?limit=500")).pageSize,
      100,
    );
    const empty = await get(ctx, a.key, "/cdp/customers/anon_9/orders");
    assert.deepEqual([empty.list, empty.totalSize], [[], 0]);
    assert.equal(
      (await ctx.request("/cdp/customers/207119551/orders?offset=9999&limit=5", a.key)).status,
      400,
    );
  });
});

Deno.test("customer insights: exact LTV, AOV, RFM, top products and churn over completed orders", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const body = await get(ctx, a.key, "/cdp/customers/bob@example.com/insights");
    assert.equal(body.matched_by, "email");
    const insights = body.insights;
    assert.equal(insights.ltv, "150.11");
    assert.equal(insights.order_count, 3);
    assert.equal(insights.aov, "50.04");
    assert.equal(insights.currency_code, "USD");
    assert.deepEqual(insights.rfm, {
      recency_score: 5,
      frequency_score: 5,
      monetary_score: 2,
      tier: "champions",
      last_order_at: "2026-03-02T00:00:00.000Z",
      order_count: 3,
      ltv: "150.11",
    });
    assert.deepEqual(insights.top_products, [
      {
        product_id: "P1",
        title: "Product P1",
        quantity: 3,
        order_count: 2,
        revenue: "110.00",
        customer_count: 1,
        repeat_purchase_rate: 1,
      },
      {
        product_id: "P2",
        title: "Product P2",
        quantity: 1,
        order_count: 1,
        revenue: "40.10",
        customer_count: 2,
        repeat_purchase_rate: 0,
      },
      {
        product_id: "P3",
        title: "Product P3",
        quantity: 1,
        order_count: 1,
        revenue: "0.01",
        customer_count: 1,
        repeat_purchase_rate: 0,
      },
    ]);
    assert.deepEqual(insights.churn, {
      days_since_last_order: 264,
      median_inter_order_days: 30,
      brand_median_inter_order_days: 30,
      at_risk_score: 4.4,
      at_risk: true,
      // No fitted model: no probability (tests/routes/predictions_test.ts has one).
      probability: null,
    });
    assert.equal(insights.predicted, null);
    const none = (await get(ctx, a.key, "/cdp/customers/anon_9/insights")).insights;
    assert.deepEqual(none, {
      ltv: "0.00",
      order_count: 0,
      aov: "0.00",
      first_order_at: null,
      last_order_at: null,
      currency_code: null,
      rfm: null,
      top_products: [],
      churn: null,
      predicted: null,
    });
  });
});

Deno.test("brand insights: LTV buckets sum to the customer count; RFM tiers; products; at-risk", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const ltv = await get(ctx, a.key, "/cdp/insights/ltv");
    assert.equal(ltv.total_revenue, "1650.11");
    assert.equal(ltv.customer_count, 3);
    assert.equal(ltv.average_ltv, "550.04");
    assert.equal(ltv.currency_code, "USD");
    assert.deepEqual(
      ltv.distribution.map((
        d: { label: string; customer_count: number },
      ) => [d.label, d.customer_count]),
      [
        ["0-100", 0],
        ["100-250", 1],
        ["250-500", 1],
        ["500-1000", 0],
        ["1000+", 1],
      ],
    );
    assert.deepEqual(ltv.distribution[4], {
      label: "1000+",
      min: 1000,
      max: null,
      customer_count: 1,
    });
    const rfm = await get(ctx, a.key, "/cdp/insights/rfm");
    assert.equal(rfm.customer_count, 3);
    assert.equal(rfm.tiers.champions, 1);
    assert.equal(rfm.tiers.active, 1);
    assert.equal(rfm.tiers.at_risk, 1);
    assert.equal(Object.values(rfm.tiers as Record<string, number>).reduce((s, n) => s + n, 0), 3);
    assert.deepEqual(rfm.scores.recency, { 1: 0, 2: 1, 3: 0, 4: 1, 5: 1 });
    const products = await get(ctx, a.key, "/cdp/insights/products?limit=2");
    assert.deepEqual(
      products.list.map((p: { product_id: string; revenue: string }) => [p.product_id, p.revenue]),
      [["P4", "1000.00"], ["P2", "340.10"]],
    );
    const risky = await get(ctx, a.key, "/cdp/insights/at-risk");
    assert.deepEqual(risky.list.map((c: { ltv: string }) => c.ltv), [
      "1200.00",
      "300.00",
      "150.11",
    ]);
    assert.equal(risky.totalSize, 3);
    const past = await get(ctx, a.key, "/cdp/insights/at-risk?offset=10");
    assert.deepEqual([past.list, past.totalSize], [[], 3]);
    const empty = await ctx.seedBrand();
    const nothing = await get(ctx, empty.key, "/cdp/insights/ltv");
    assert.equal(nothing.average_ltv, "0.00");
    assert.equal(nothing.distribution.length, 5);
  });
});

Deno.test("RFM tier map: every cell is named and the documented corners hold", () => {
  for (const r of [1, 2, 3, 4, 5]) assert.equal(RFM_TIER_MAP[r]!.length, 5);
  assert.equal(rfmTier(5, 5, 5), "champions");
  assert.equal(rfmTier(5, 1, 1), "new");
  assert.equal(rfmTier(1, 5, 5), "previously_loyal");
  assert.equal(rfmTier(1, 1, 1), "dormant");
  assert.equal(rfmTier(2, 3, 3), "at_risk");
});

Deno.test("integrations: id, integration_id, is_enabled, status, connected_at only", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const body = await get(ctx, a.key, "/cdp/integrations");
    assert.equal(body.scope, a.scope);
    assert.deepEqual(Object.keys(body.list[0]).sort(), [
      "connected_at",
      "id",
      "integration_id",
      "is_enabled",
      "status",
    ]);
    assert.equal(body.list[0].status, "connected");
  });
});

// ---------------------------------------------------------------------------------------------
// The record's segment list: one heavy read on the brand's share, within the time budget

const hasEmail = {
  type: "profilePropertyCondition",
  parameterValues: { propertyName: "properties.email", comparisonOperator: "exists" },
};
const everyone = { type: "matchAllCondition", parameterValues: {} };
const regex = (pattern: string) => ({
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.email",
    comparisonOperator: "matchesRegex",
    propertyValue: pattern,
  },
});

/** A brand with Bob's profile and the given segments; returns their ids by key. */
async function withSegments(ctx: TestContext, segments: Record<string, unknown>) {
  const a = await ctx.seedBrand();
  await ctx.deps.engine.applyEvents({
    scope: a.scope!,
    source: "server",
    receivedAt: ctx.clock.now().toISOString(),
    events: [{
      id: newId(),
      eventType: "updateProperties",
      profileId: "bob",
      properties: { update: { "properties.email": "bob@example.com" } },
    }],
  });
  const ids: Record<string, string> = {};
  for (const [key, condition] of Object.entries(segments)) {
    const res = await ctx.request("/cdp/segments", a.key, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: key, key, condition }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    ids[key] = (await res.json()).id;
  }
  return { a, ids };
}

Deno.test("customer record: its segments run on the brand's heavy-read share; with the share taken they are unknown, the record 200", async () => {
  await withContext(async (ctx) => {
    const { a, ids } = await withSegments(ctx, { all: everyone, emails: hasEmail });
    // The test pool has 4 connections: 2 heavy reads per brand. An export holds its permit until
    // its body is read.
    const exports = [
      await ctx.request(`/cdp/segments/${ids.all}/export`, a.key),
      await ctx.request(`/cdp/segments/${ids.all}/export`, a.key),
    ];
    assert.deepEqual(exports.map((r) => r.status), [200, 200]);
    const busy = await get(ctx, a.key, "/cdp/customers/bob");
    assert.deepEqual(busy.profile.segments, []);
    assert.deepEqual(busy.profile.segments_unknown, [ids.all, ids.emails]);
    for (const res of exports) await res.text();
    const free = await get(ctx, a.key, "/cdp/customers/bob");
    assert.deepEqual(free.profile.segments, [ids.all, ids.emails]);
    assert.deepEqual(free.profile.segments_unknown, []);
  });
});

Deno.test("customer record: a segment that cannot run is unknown, never a 400 with the database's message", async () => {
  await withContext(async (ctx) => {
    const { a, ids } = await withSegments(ctx, { emails: hasEmail, bob: regex("bob@.*") });
    // Too complex for Postgres, saved before the validator's cost rule refused it: written as
    // the store holds it, past today's validation.
    ids.complex = `seg__${a.scope}__complex`;
    await ctx.sql`
      insert into segments (scope, id, name, condition, created_at, updated_at)
      values (${a.scope!}, ${ids.complex}, 'complex', ${
      JSON.stringify(regex("((a?){99}){99}"))
    }::text::json, now(), now())`;
    const res = await ctx.request("/cdp/customers/bob", a.key);
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.doesNotMatch(text, /regular expression/i);
    const record = JSON.parse(text);
    assert.deepEqual(record.profile.segments, [ids.bob, ids.emails]);
    assert.deepEqual(record.profile.segments_unknown, [ids.complex]);
  });
});

Deno.test(
  "customer record: a segment past QUERY_TIMEOUT_MS is unknown, the cheap ones decided, the record 200",
  {
    // PGlite runs in this thread and does not enforce statement_timeout: nothing can interrupt it.
    ignore: !DATABASE_URL,
  },
  async () => {
    await withContext(async (ctx) => {
      // Their 80 distinct patterns (20 each, the cap; each within the cost rule) take many times
      // the budget of 100 ms to compile.
      const slow = slowSegments(4, "rec");
      const { a, ids } = await withSegments(ctx, { all: everyone, emails: hasEmail, ...slow });
      const record = await get(ctx, a.key, "/cdp/customers/bob");
      // The cheap ones decided; only slow ones (which match nobody) unknown, at least the one
      // the budget cut (how many finish before it is the machine's business).
      assert.deepEqual(record.profile.segments, [ids.all, ids.emails]);
      const slowIds = Object.keys(slow).map((key) => ids[key]!);
      const unknown: string[] = record.profile.segments_unknown;
      assert.ok(unknown.length > 0, "no segment was cut by the budget");
      assert.ok(unknown.every((id) => slowIds.includes(id)), String(unknown));
    }, { QUERY_TIMEOUT_MS: "100" });
  },
);
