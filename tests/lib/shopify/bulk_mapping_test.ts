import assert from "node:assert/strict";
import { OrderLineSchema } from "../../../lib/commerce/order_lines.ts";
import {
  customersBulkQuery,
  gidNumber,
  mapBulkCustomer,
  mapBulkOrder,
  ordersBulkQuery,
} from "../../../lib/shopify/bulk_mapping.ts";
import { mapShopifyOrder } from "../../../lib/shopify/order_mapping.ts";
import { bulkCustomer, bulkLineItem, bulkOrder } from "./fake_bulk_api.ts";
import { shopifyOrder } from "./shopify_payloads.ts";

Deno.test("mapBulkOrder: GIDs become the webhooks' ids, money stays exact decimal text", () => {
  const line = OrderLineSchema.parse(
    mapBulkOrder(bulkOrder(820982911946154), [
      bulkLineItem(820982911946154, 0),
      bulkLineItem(820982911946154, 1),
    ]),
  );
  assert.deepEqual(line, {
    external_id: "820982911946154",
    number: "#820982911946154",
    state: "complete",
    billing_status: "complete",
    total: "60.1",
    currency_code: "USD",
    created_at: "2025-03-01T10:00:00Z",
    processed_at: "2025-03-01T10:00:01Z",
    updated_at: "2025-03-02T10:00:00Z",
    customer: {
      shopify_customer_id: "500154",
      email: "C500154@Example.com",
      phone: null,
      first_name: "Cee",
      last_name: "500154",
    },
    line_items: [
      {
        title: "Tee 0",
        quantity: 1,
        price: "30.05",
        sku: "TEE-0",
        product_id: "700",
        variant_id: "800",
        variant_title: "M",
      },
      {
        title: "Tee 1",
        quantity: 2,
        price: "29.99",
        sku: "TEE-1",
        product_id: "701",
        variant_id: "801",
        variant_title: null,
      },
    ],
  });
  assert.equal("recovered_at" in line, false, "absent, so a stored value is kept");
  // The webhook of the same order names the same order and customer.
  const webhook = mapShopifyOrder(shopifyOrder());
  const bulk = OrderLineSchema.parse(mapBulkOrder(
    bulkOrder(820982911946154, {
      customer: { id: "gid://shopify/Customer/207119551", email: null, phone: null },
    }),
    [],
  ));
  assert.equal(bulk.external_id, webhook.external_id);
  assert.equal(bulk.customer?.shopify_customer_id, webhook.customer?.shopify_customer_id);
});

Deno.test("mapBulkOrder: statuses follow the webhook tables; 3-decimal money rounds on the digits", () => {
  const map = (extra: Record<string, unknown>) =>
    OrderLineSchema.parse(mapBulkOrder(bulkOrder(5, extra), []));
  assert.equal(map({ cancelledAt: "2025-03-03T00:00:00Z" }).state, "cancelled");
  assert.deepEqual(
    [map({ displayFinancialStatus: "REFUNDED" }).state, map({}).billing_status],
    ["cancelled", "complete"],
  );
  assert.equal(map({ displayFinancialStatus: "AUTHORIZED" }).billing_status, "processing");
  assert.equal(map({ displayFinancialStatus: null }).state, "draft");
  const kwd = map({
    currencyCode: "KWD",
    totalPriceSet: { shopMoney: { amount: "90071992547409.995", currencyCode: "KWD" } },
  });
  assert.deepEqual([kwd.total, kwd.currency_code], ["90071992547410.00", "KWD"]);
  // No customer object: the order's own email makes the customer.
  assert.deepEqual(map({ customer: null, email: "a@b.co" }).customer, {
    shopify_customer_id: null,
    email: "a@b.co",
    phone: null,
    first_name: null,
    last_name: null,
  });
  assert.equal(map({ customer: null, email: null }).customer, null);
  // A total that is not a decimal is left for the import's schema to reject.
  assert.equal(
    OrderLineSchema.safeParse(
      mapBulkOrder(bulkOrder(5, { totalPriceSet: { shopMoney: { amount: "1e3" } } }), []),
    ).success,
    false,
  );
});

Deno.test("mapBulkCustomer and the queries", () => {
  assert.deepEqual(mapBulkCustomer(bulkCustomer(9, { phone: "+16135551111" })), {
    customer: {
      shopify_customer_id: "9",
      email: "C9@Example.com",
      phone: "+16135551111",
      first_name: "Cee",
      last_name: "9",
    },
    updatedAt: "2025-01-01T00:00:00Z",
  });
  assert.equal(mapBulkCustomer({ id: "gid://shopify/Order/1x" }), null);
  assert.equal(gidNumber("gid://shopify/Order/18446744073709551615"), "18446744073709551615");
  assert.match(customersBulkQuery(null), /^\{\s*customers \{/);
  assert.match(ordersBulkQuery(null), /lineItems \{ edges \{ node \{/);
  assert.match(customersBulkQuery("2024-02-29"), /customers\(query: "created_at:>=2024-02-29"\)/);
});
