import assert from "node:assert/strict";
import { DomainError } from "../../../lib/errors.ts";
import { toHttpError } from "../../../lib/http/errors.ts";
import {
  mapOrderStatus,
  mapShopifyCustomer,
  mapShopifyOrder,
  mapShopifySubscription,
  parseShopifyJson,
} from "../../../lib/shopify/order_mapping.ts";
import { shopifyOrder } from "./shopify_payloads.ts";

Deno.test("mapShopifyOrder: every field of the documented mapping", () => {
  assert.deepEqual(mapShopifyOrder(shopifyOrder()), {
    external_id: "820982911946154",
    number: "#1001",
    state: "complete",
    billing_status: "complete",
    total: "199.99",
    currency_code: "USD",
    created_at: "2026-01-02T03:04:05-05:00",
    processed_at: "2026-01-02T03:04:06-05:00",
    updated_at: "2026-01-02T03:04:07-05:00",
    recovered_at: null,
    customer: {
      shopify_customer_id: "207119551",
      email: "Bob@Example.com",
      phone: "+1 613 555 1111",
      first_name: "Bob",
      last_name: "Norman",
    },
    line_items: [{
      title: "IPod Nano - 8gb",
      quantity: 2,
      price: "30.00",
      sku: "IPOD2008GREEN",
      product_id: "632910392",
      variant_id: "39072856",
      variant_title: "green",
    }, {
      title: "Custom engraving",
      quantity: 1,
      price: "129.99",
      sku: null,
      product_id: null,
      variant_id: null,
      variant_title: null,
    }],
  });
});

Deno.test("mapOrderStatus: the state and billing status table", () => {
  const cases: [Record<string, unknown>, string, string][] = [
    [{ financial_status: "paid" }, "complete", "complete"],
    [{ financial_status: "PAID" }, "complete", "complete"],
    [{ financial_status: "partially_refunded" }, "complete", "complete"],
    [{ financial_status: "pending" }, "pending", "billable"],
    [{ financial_status: "authorized" }, "pending", "processing"],
    [{ financial_status: "partially_paid" }, "pending", "processing"],
    [{ financial_status: "expired" }, "pending", "on_hold"],
    [{ financial_status: "voided" }, "cancelled", "on_hold"],
    [{ financial_status: "refunded" }, "cancelled", "on_hold"],
    [{ financial_status: "some_future_status" }, "pending", "billable"],
    [{ financial_status: "paid", cancelled_at: "2026-01-03T00:00:00Z" }, "cancelled", "complete"],
    [
      { financial_status: "refunded", cancelled_at: "2026-01-03T00:00:00Z" },
      "cancelled",
      "on_hold",
    ],
    [{ financial_status: "voided", cancelled_at: "2026-01-03T00:00:00Z" }, "cancelled", "on_hold"],
    [{}, "draft", "billable"],
    [{ financial_status: null }, "draft", "billable"],
    [{ financial_status: "" }, "draft", "billable"],
  ];
  for (const [input, state, billing] of cases) {
    assert.deepEqual(
      mapOrderStatus(input),
      { state, billing_status: billing },
      JSON.stringify(input),
    );
  }
});

Deno.test("mapShopifyOrder: fulfilled and paid stays complete; fulfilled and pending stays pending", () => {
  const paid = mapShopifyOrder(shopifyOrder({ fulfillment_status: "fulfilled" }));
  assert.equal(paid.state, "complete");
  assert.equal(paid.billing_status, "complete");
  const unpaid = mapShopifyOrder(
    shopifyOrder({ fulfillment_status: "fulfilled", financial_status: "pending" }),
  );
  assert.equal(unpaid.state, "pending");
  assert.equal(unpaid.billing_status, "billable");
});

Deno.test("mapShopifyOrder: draft without a financial status; an order completed from a draft is mapped like any other", () => {
  const draft = mapShopifyOrder(
    shopifyOrder({ financial_status: null, source_name: "shopify_draft_order" }),
  );
  assert.equal(draft.state, "draft");
  assert.equal(draft.billing_status, "billable");
  const fromDraft = mapShopifyOrder(shopifyOrder({ source_name: "shopify_draft_order" }));
  assert.equal(fromDraft.state, "complete");
});

Deno.test("mapShopifyOrder: the customer falls back to the order's email and phone", () => {
  const guest = mapShopifyOrder(
    shopifyOrder({ customer: null, email: "guest@example.com", phone: "+44 20 7946 0958" }),
  );
  assert.deepEqual(guest.customer, {
    shopify_customer_id: null,
    email: "guest@example.com",
    phone: "+44 20 7946 0958",
    first_name: null,
    last_name: null,
  });
  const contactEmail = mapShopifyOrder(
    shopifyOrder({ customer: { id: 5 }, email: "", contact_email: "c@example.com" }),
  );
  assert.equal(contactEmail.customer?.shopify_customer_id, "5");
  assert.equal(contactEmail.customer?.email, "c@example.com");
  const nobody = mapShopifyOrder(
    shopifyOrder({ customer: null, email: null, contact_email: null, phone: null }),
  );
  assert.equal(nobody.customer, null);
});

Deno.test("mapShopifyOrder: number falls back to order_number; id to the GraphQL id", () => {
  const line = mapShopifyOrder(
    shopifyOrder({
      name: undefined,
      id: undefined,
      admin_graphql_api_id: "gid://shopify/Order/77",
    }),
  );
  assert.equal(line.number, "#1001");
  assert.equal(line.external_id, "77");
});

Deno.test("mapShopifyOrder: money with 3 decimals is rounded to cents", () => {
  assert.equal(mapShopifyOrder(shopifyOrder({ total_price: "12.345" })).total, "12.35");
  assert.equal(mapShopifyOrder(shopifyOrder({ total_price: "12.500" })).total, "12.50");
  assert.equal(mapShopifyOrder(shopifyOrder({ total_price: "0.004" })).total, "0.00");
  assert.equal(mapShopifyOrder(shopifyOrder({ total_price: "0.999" })).total, "1.00");
});

Deno.test("mapShopifyOrder: a payload that does not map is 400 naming the fields", () => {
  assert.throws(
    () => mapShopifyOrder(shopifyOrder({ currency: "usd", total_price: "ten", created_at: null })),
    (thrown: unknown) => {
      assert.ok(thrown instanceof DomainError);
      const err = toHttpError(thrown);
      assert.equal(err.status, 400);
      assert.equal(err.code, "bad_request");
      assert.match(err.message, /order\.total/);
      assert.match(err.message, /order\.currency_code/);
      assert.match(err.message, /order\.created_at/);
      return true;
    },
  );
  assert.throws(() => mapShopifyOrder({ name: "#1" }), /order\.external_id/);
});

Deno.test("parseShopifyJson: integers past 2^53 keep every digit", () => {
  const parsed = parseShopifyJson(
    '{"id":820982911946154508,"n":5,"price":"1.50","f":1.5,"nested":[{"product_id":9007199254740993}]}',
  ) as Record<string, unknown>;
  assert.equal(parsed.id, "820982911946154508");
  assert.equal(parsed.n, 5);
  assert.equal(parsed.f, 1.5);
  assert.deepEqual(parsed.nested, [{ product_id: "9007199254740993" }]);
  const line = mapShopifyOrder(
    parseShopifyJson(
      JSON.stringify(shopifyOrder()).replace(
        '"id":820982911946154,',
        '"id":820982911946154508,',
      ),
    ) as Record<string, unknown>,
  );
  assert.equal(line.external_id, "820982911946154508");
  assert.throws(() => parseShopifyJson("{"), SyntaxError);
});

Deno.test("mapShopifyCustomer: id, email, phone and names", () => {
  assert.deepEqual(
    mapShopifyCustomer({
      id: 706405506930,
      email: "bob@example.com",
      phone: null,
      first_name: "Bob",
      last_name: "Biller",
      updated_at: "2026-01-01T00:00:00Z",
    }),
    {
      shopify_customer_id: "706405506930",
      email: "bob@example.com",
      phone: null,
      first_name: "Bob",
      last_name: "Biller",
    },
  );
  assert.equal(mapShopifyCustomer({ id: "123" }).shopify_customer_id, "123");
  assert.throws(() => mapShopifyCustomer({ email: "x@example.com" }), /customer\.id/);
});

Deno.test("mapShopifySubscription: status lower-cased, ids from id or GraphQL ids", () => {
  for (
    const [status, expected] of [
      ["ACTIVE", "active"],
      ["PAUSED", "paused"],
      ["CANCELLED", "cancelled"],
      ["EXPIRED", "expired"],
      ["FAILED", "failed"],
    ]
  ) {
    assert.equal(mapShopifySubscription({ id: 1, status }).status, expected);
  }
  assert.deepEqual(
    mapShopifySubscription({
      admin_graphql_api_id: "gid://shopify/SubscriptionContract/5577",
      id: 5577,
      status: "ACTIVE",
      customer_id: 207119551,
      admin_graphql_api_customer_id: "gid://shopify/Customer/207119551",
      next_billing_date: "2026-02-01T00:00:00Z",
      revision_id: 1,
    }),
    {
      external_id: "5577",
      status: "active",
      next_billing_date: "2026-02-01T00:00:00Z",
      customer: { shopify_customer_id: "207119551", email: null },
    },
  );
  const fromGids = mapShopifySubscription({
    admin_graphql_api_id: "gid://shopify/SubscriptionContract/88",
    status: "PAUSED",
    admin_graphql_api_customer_id: "gid://shopify/Customer/9",
    customer: { email: "sub@example.com" },
  });
  assert.equal(fromGids.external_id, "88");
  assert.deepEqual(fromGids.customer, { shopify_customer_id: "9", email: "sub@example.com" });
  assert.equal(fromGids.next_billing_date, null);
  assert.throws(() => mapShopifySubscription({ id: 1, status: "DORMANT" }), /subscription\.status/);
});
