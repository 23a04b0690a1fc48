import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { setBrand } from "../../lib/tenancy/brands.ts";
import { OrderLineSchema, SubscriptionLineSchema } from "../../lib/commerce/order_lines.ts";
import { upsertOrder } from "../../lib/commerce/orders.ts";
import { upsertSubscription } from "../../lib/commerce/subscriptions.ts";
import { errorBody, type TestContext, withContext } from "../test_support.ts";

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;
const newId = monotonicFactory();

async function orders(ctx: TestContext, brand: Brand, lines: Record<string, unknown>[]) {
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

const order = (id: string, extra: Record<string, unknown> = {}) => ({
  external_id: id,
  number: `#${id}`,
  state: "complete",
  billing_status: "complete",
  total: "10.00",
  currency_code: "USD",
  created_at: "2026-01-01T00:00:00Z",
  ...extra,
});

const bob = {
  shopify_customer_id: "207119551",
  email: "bob@example.com",
  phone: "+1 613 555 1111",
};
const ann = { shopify_customer_id: "300", email: "ann@example.com", phone: "+44 20 7946 0958" };

async function seed(ctx: TestContext) {
  const a = await ctx.seedBrand();
  const b = await ctx.seedBrand();
  await orders(ctx, a, [
    order("1001", {
      total: "199.9",
      customer: bob,
      created_at: "2026-01-02T03:04:05Z",
      line_items: [{
        title: "Tee",
        quantity: 2,
        price: "30.00",
        sku: "TEE-M",
        product_id: "632910392",
        variant_id: "808950810",
        variant_title: "M",
      }],
    }),
    order("1002", {
      state: "cancelled",
      billing_status: "on_hold",
      total: "5",
      customer: bob,
      created_at: "2026-02-01T00:00:00Z",
    }),
    order("1003", {
      state: "pending",
      billing_status: "billable",
      customer: ann,
      created_at: "2026-03-01T00:00:00Z",
      recovered_at: "2026-03-02T00:00:00Z",
    }),
    order("1004", { created_at: "2026-04-01T00:00:00Z" }),
  ]);
  await orders(ctx, b, [order("1001", { total: "999.00", customer: bob })]);
  return { a, b };
}

const list = async (ctx: TestContext, key: string, query = "") =>
  await (await ctx.request(`/cdp/commerce/orders${query}`, key)).json();
const ids = (page: { list: { external_id: string }[] }) => page.list.map((o) => o.external_id);

Deno.test("commerce gates: beta first, then a connected, enabled integration", async () => {
  await withContext(async (ctx) => {
    const noBeta = await ctx.seedBrand({ beta: false });
    const noShop = await ctx.seedBrand({ shop: null });
    const disconnected = await ctx.seedBrand();
    await setBrand(ctx.deps, { brandId: disconnected.brandId, integration: "disconnected" });
    for (
      const path of [
        "/cdp/commerce/orders",
        "/cdp/commerce/orders/1",
        "/cdp/commerce/subscriptions",
        "/cdp/commerce/subscriptions/1",
      ]
    ) {
      const beta = await ctx.request(path, noBeta.key);
      assert.equal(beta.status, 403, path);
      assert.equal((await errorBody(beta)).error, "beta_not_enabled");
      assert.equal(
        (await errorBody(await ctx.request(path, noShop.key))).error,
        "integration_not_connected",
      );
      assert.equal(
        (await errorBody(await ctx.request(path, disconnected.key))).error,
        "integration_not_connected",
      );
    }
  });
});

Deno.test("orders: newest first, money as 2-decimal strings, the summary shape, nextCursor null", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const page = await list(ctx, a.key);
    assert.deepEqual(ids(page), ["1004", "1003", "1002", "1001"]);
    assert.equal(page.totalSize, 4);
    assert.equal(page.nextCursor, null);
    assert.equal(page.scope, a.scope);
    const first = page.list.find((o: { external_id: string }) => o.external_id === "1001");
    assert.deepEqual(Object.keys(first).sort(), [
      "billing_status",
      "created_at",
      "currency_code",
      "customer",
      "external_id",
      "id",
      "number",
      "recovered_at",
      "state",
      "total",
    ]);
    assert.equal(first.total, "199.90");
    assert.equal(first.created_at, "2026-01-02T03:04:05.000Z");
    assert.ok(first.customer.contact_id);
  });
});

Deno.test("orders: state, billing status and date filters; invalid values are 400", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    assert.deepEqual(ids(await list(ctx, a.key, "?state=complete")), ["1004", "1001"]);
    assert.deepEqual(ids(await list(ctx, a.key, "?billing_status=on_hold")), ["1002"]);
    // limit is clamped to 100, as the contract says.
    assert.equal((await list(ctx, a.key, "?limit=500")).pageSize, 100);
    assert.deepEqual(
      ids(
        await list(
          ctx,
          a.key,
          "?created_at_gte=2026-02-01T00:00:00Z&created_at_lte=2026-03-01T00:00:00Z",
        ),
      ),
      ["1003", "1002"],
    );
    for (
      const bad of [
        "?state=shipped",
        "?billing_status=paid",
        "?created_at_gte=yesterday",
        "?offset=9990&limit=20",
        "?limit=0",
      ]
    ) {
      const res = await ctx.request(`/cdp/commerce/orders${bad}`, a.key);
      assert.equal(res.status, 400, bad);
      assert.equal((await errorBody(res)).error, "bad_request");
    }
  });
});

Deno.test("orders: customer filters resolve one customer by email, then id, then phone", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    assert.deepEqual(ids(await list(ctx, a.key, "?customer_email=%20BOB@example.com")), [
      "1002",
      "1001",
    ]);
    assert.deepEqual(ids(await list(ctx, a.key, "?customer_id=300")), ["1003"]);
    assert.deepEqual(
      ids(await list(ctx, a.key, `?customer_phone=${encodeURIComponent("+1 (613) 555-1111")}`)),
      ["1002", "1001"],
    );
    // Email wins over the other two, even when they name someone else.
    assert.deepEqual(
      ids(await list(ctx, a.key, "?customer_email=bob@example.com&customer_id=300")),
      ["1002", "1001"],
    );
    assert.deepEqual(
      ids(
        await list(
          ctx,
          a.key,
          `?customer_id=300&customer_phone=${encodeURIComponent("+16135551111")}`,
        ),
      ),
      ["1003"],
    );
    const nobody = await list(ctx, a.key, "?customer_email=nobody@example.com");
    assert.deepEqual(nobody.list, []);
    assert.equal(nobody.totalSize, 0);
    assert.deepEqual((await list(ctx, a.key, "?customer_phone=613-555-1111")).list, []);
  });
});

Deno.test("orders: detail shape with line items; another brand's order is the same 404", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seed(ctx);
    const res = await ctx.request("/cdp/commerce/orders/1001", a.key);
    assert.equal(res.status, 200);
    const detail = await res.json();
    assert.equal(detail.total, "199.90");
    assert.equal(detail.customer.shopify_customer_id, "207119551");
    assert.equal(detail.processed_at, null);
    assert.equal(detail.updated_at, null);
    assert.deepEqual(detail.line_items, [
      {
        title: "Tee",
        quantity: 2,
        price: "30.00",
        sku: "TEE-M",
        product_id: "632910392",
        variant_id: "808950810",
        variant_title: "M",
      },
    ]);
    assert.equal(JSON.stringify(detail).includes("raw"), false);
    const noItems = await (await ctx.request("/cdp/commerce/orders/1004", a.key)).json();
    assert.deepEqual(noItems.line_items, []);
    assert.equal(noItems.customer.shopify_customer_id, undefined);
    // B's order 1001 is a different order; A's 1003 does not exist for B.
    assert.equal(
      (await (await ctx.request("/cdp/commerce/orders/1001", b.key)).json()).total,
      "999.00",
    );
    const foreign = await ctx.request("/cdp/commerce/orders/1003", b.key);
    assert.equal(foreign.status, 404);
    assert.deepEqual(await errorBody(foreign), {
      error: "not_found",
      error_description: "Order not found",
    });
    assert.deepEqual(await errorBody(await ctx.request("/cdp/commerce/orders/nope", a.key)), {
      error: "not_found",
      error_description: "Order not found",
    });
  });
});

Deno.test("subscriptions: list with filters and single read, per brand", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seed(ctx);
    await ctx.sql.begin(async (tx) => {
      for (
        const raw of [
          {
            external_id: "s1",
            status: "active",
            next_billing_date: "2026-12-01T00:00:00Z",
            customer: bob,
          },
          { external_id: "s2", status: "cancelled", customer: ann },
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
    const all = await (await ctx.request("/cdp/commerce/subscriptions", a.key)).json();
    assert.deepEqual(all.list.map((s: { external_id: string }) => s.external_id), ["s1", "s2"]);
    const active = await (await ctx.request("/cdp/commerce/subscriptions?status=active", a.key))
      .json();
    assert.equal(active.list[0].next_billing_date, "2026-12-01T00:00:00.000Z");
    const annOnly =
      await (await ctx.request("/cdp/commerce/subscriptions?customer_email=ann@example.com", a.key))
        .json();
    assert.deepEqual(annOnly.list.map((s: { status: string }) => s.status), ["cancelled"]);
    assert.equal((await ctx.request("/cdp/commerce/subscriptions/s1", a.key)).status, 200);
    assert.equal((await ctx.request("/cdp/commerce/subscriptions/s1", b.key)).status, 404);
    assert.equal(
      (await (await ctx.request("/cdp/commerce/subscriptions", b.key)).json()).totalSize,
      0,
    );
  });
});
