// The samples are Shopify's standard events as shopify.dev documents them
// (https://shopify.dev/docs/api/web-pixels-api/standard-events/<name>, one page per event: each
// sample's `source`), see tests/fixtures/shopify/README.md.
import assert from "node:assert/strict";
import { checkEvent } from "../../../lib/engine/engine.ts";
import {
  mapShopifyPixelEvent,
  parseShopifyPixelEvent,
  SHOPIFY_PIXEL_EVENTS,
  shopifyNumericId,
} from "../../../lib/ingest/shopify_pixel_spec.ts";
// @ts-types="../../../extensions/web-pixel/src/pixel.d.ts"
import { PIXEL_EVENTS, trimEvent } from "../../../extensions/web-pixel/src/pixel.js";

const fixture = JSON.parse(
  await Deno.readTextFile(new URL("../../fixtures/shopify/pixel_events.json", import.meta.url)),
) as { samples: { source: string; event: Record<string, unknown> }[] };

function sample(name: string): Record<string, unknown> {
  const found = fixture.samples.find((s) => s.event.name === name);
  assert.ok(found, name);
  assert.equal(found.source, `https://shopify.dev/docs/api/web-pixels-api/standard-events/${name}`);
  return structuredClone(found.event);
}

function mapOk(raw: unknown) {
  const parsed = parseShopifyPixelEvent(raw);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const mapped = mapShopifyPixelEvent(parsed.event);
  assert.equal(checkEvent({ id: "x", ...mapped.event }), null, JSON.stringify(mapped.event));
  return mapped;
}

Deno.test("every standard event of the fixture maps to the catalog type of its name, on clientId", () => {
  assert.deepEqual(
    fixture.samples.map((s) => s.event.name).sort(),
    [...SHOPIFY_PIXEL_EVENTS].sort(),
  );
  for (const { event } of fixture.samples) {
    const { event: mapped } = mapOk(event);
    assert.equal(mapped.eventType, event.name);
    assert.equal(mapped.profileId, event.clientId);
    assert.equal(mapped.timeStamp, new Date(event.timestamp as string).toISOString());
  }
});

Deno.test("the pixel sends exactly the events the door maps, and its trimmed events map alike", () => {
  assert.deepEqual([...PIXEL_EVENTS], [...SHOPIFY_PIXEL_EVENTS]);
  for (const { event } of fixture.samples) {
    assert.deepEqual(mapOk(trimEvent(event)).event, mapOk(event).event, String(event.name));
  }
});

Deno.test("page_viewed: the page from context.document, the context in Segment's shape", () => {
  const { event, claim } = mapOk(sample("page_viewed"));
  assert.equal(claim, null);
  const url =
    "https://acme.myshopify.com/?utm_source=newsletter&utm_medium=email&utm_campaign=fall";
  assert.deepEqual(event.properties, {
    url,
    path: "/",
    search: "?utm_source=newsletter&utm_medium=email&utm_campaign=fall",
    title: "Acme",
    referrer: "https://www.google.com/",
    context: {
      page: {
        url,
        path: "/",
        search: "?utm_source=newsletter&utm_medium=email&utm_campaign=fall",
        referrer: "https://www.google.com/",
        title: "Acme",
      },
      userAgent:
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
      locale: "en-US",
      library: { name: "shopify-web-pixel", version: "1.0.0" },
    },
  });
});

Deno.test("product_viewed: product and variant ids, titles, price and currency", () => {
  const { properties } = mapOk(sample("product_viewed")).event;
  const { context: _, ...rest } = properties!;
  assert.deepEqual(rest, {
    productId: "7808926384363",
    variantId: "43218082857195",
    title: "Striped Skirt and Top",
    variantTitle: "M",
    sku: "SKIRT-M",
    vendor: "Acme",
    productType: "Skirts",
    price: 50,
    currencyCode: "USD",
    url: "https://acme.myshopify.com/products/striped-skirt-and-top",
  });
});

Deno.test("collection_viewed and search_submitted: ids, titles, the query and counts", () => {
  const collection = mapOk(sample("collection_viewed")).event.properties!;
  assert.equal(collection.collectionId, "408385257707");
  assert.equal(collection.title, "Fall");
  assert.equal(collection.productCount, 2);
  const search = mapOk(sample("search_submitted")).event.properties!;
  assert.equal(search.query, "shirt");
  assert.equal(search.resultCount, 1);
});

Deno.test("cart events: the line's variant, quantity and total; the cart's lines and total", () => {
  const added = mapOk(sample("product_added_to_cart")).event.properties!;
  assert.equal(added.productId, "7808926384363");
  assert.equal(added.quantity, 2);
  assert.equal(added.price, 50);
  assert.equal(added.lineTotal, 100);
  const removed = mapOk(sample("product_removed_from_cart")).event.properties!;
  assert.equal(removed.variantId, "43218082726123");
  assert.equal(removed.sku, undefined, "a null sku is left out");
  const cart = mapOk(sample("cart_viewed")).event.properties!;
  assert.equal(cart.cartId, "Z2NwLXVzLWVhc3QxOjAxSE1");
  assert.equal(cart.totalPrice, 130);
  assert.equal(cart.currencyCode, "USD");
  assert.equal(cart.lineItemCount, 2);
  assert.equal(cart.totalQuantity, 3);
  assert.deepEqual(
    (cart.lines as Record<string, unknown>[]).map((l) => [l.productId, l.quantity]),
    [
      ["7808926384363", 2],
      ["7808926253291", 1],
    ],
  );
});

Deno.test("checkout steps: token, totals, lines; no email, phone or address is stored", () => {
  for (
    const name of [
      "checkout_started",
      "checkout_contact_info_submitted",
      "checkout_address_info_submitted",
      "checkout_shipping_info_submitted",
      "payment_info_submitted",
    ]
  ) {
    const { event, claim } = mapOk(sample(name));
    assert.equal(claim, null, name);
    const p = event.properties!;
    assert.equal(p.checkoutToken, "b1946ac92492d2347c6235b4d2611184");
    assert.equal(p.totalPrice, 140);
    assert.equal(p.subtotalPrice, 130);
    assert.equal(p.currencyCode, "USD");
    assert.equal(p.lineItemCount, 2);
    const text = JSON.stringify(event);
    for (const secret of ["example.com", "6135550123", "Main St", "K2P"]) {
      assert.ok(!text.includes(secret), `${name} stores ${secret}`);
    }
  }
});

Deno.test("checkout_completed: the order id (OrderIdentity gid → number) and a claim with the email", () => {
  const { event, claim } = mapOk(sample("checkout_completed"));
  assert.equal(event.properties!.orderId, "450789469");
  assert.equal(event.properties!.customerId, "207119551");
  assert.deepEqual(claim, {
    clientId: "sh-5f2c9a1e-4A1B-4C2D-9E3F-0A1B2C3D4E5F",
    orderId: "450789469",
    email: "bob.norman@example.com",
  });
  // The bare number, as a string or a number, is the same order.
  for (const id of ["450789469", 450789469]) {
    const raw = sample("checkout_completed");
    (raw.data as { checkout: { order: { id: unknown } } }).checkout.order.id = id;
    assert.equal(mapOk(raw).claim?.orderId, "450789469");
  }
  // Without an order (an upsell page before it exists) there is nothing to claim.
  const raw = sample("checkout_completed");
  (raw.data as { checkout: { order: unknown } }).checkout.order = null;
  assert.equal(mapOk(raw).claim, null);
});

Deno.test("shopifyNumericId: gids and bare numbers; anything else is no id", () => {
  assert.equal(shopifyNumericId("gid://shopify/OrderIdentity/450789469"), "450789469");
  assert.equal(shopifyNumericId("gid://shopify/Order/450789469"), "450789469");
  assert.equal(shopifyNumericId(" 42 "), "42");
  assert.equal(shopifyNumericId(42), "42");
  for (const bad of ["gid://shopify/Order/", "abc", "12a", -1, 1.5, null, {}, "gid://x/Order/1"]) {
    assert.equal(shopifyNumericId(bad), undefined, JSON.stringify(bad));
  }
});

Deno.test("malformed events are refused with their paths; unknown members are ignored", () => {
  const bad = (patch: Record<string, unknown>) => {
    const r = parseShopifyPixelEvent({ ...sample("page_viewed"), ...patch });
    assert.equal(r.ok, false);
    return (r as { errors: { path: string; message: string }[] }).errors;
  };
  assert.equal(bad({ name: "alert_displayed" })[0]!.path, "$.name");
  assert.equal(bad({ name: "custom_event" })[0]!.path, "$.name");
  assert.equal(bad({ clientId: "a:b" })[0]!.path, "$.clientId");
  assert.equal(bad({ clientId: "store_1" })[0]!.path, "$.clientId");
  assert.equal(bad({ clientId: "x".repeat(61) })[0]!.path, "$.clientId");
  assert.equal(bad({ timestamp: "yesterday" })[0]!.path, "$.timestamp");
  assert.equal(bad({ id: undefined })[0]!.path, "$.id");
  assert.equal(bad({ data: [] })[0]!.path, "$.data");
  assert.equal(parseShopifyPixelEvent(null).ok, false);
  const extra = parseShopifyPixelEvent({ ...sample("page_viewed"), customData: { x: 1 } });
  assert.ok(extra.ok);
  assert.equal(JSON.stringify(mapShopifyPixelEvent(extra.event)).includes("customData"), false);
});

Deno.test("search_submitted without a query is refused by the catalog, not mapped to a guess", () => {
  const raw = sample("search_submitted");
  (raw.data as { searchResult: { query?: string } }).searchResult.query = undefined;
  const parsed = parseShopifyPixelEvent(raw);
  assert.ok(parsed.ok);
  const problem = checkEvent({ id: "x", ...mapShopifyPixelEvent(parsed.event).event });
  assert.match(problem?.error ?? "", /query/);
});
