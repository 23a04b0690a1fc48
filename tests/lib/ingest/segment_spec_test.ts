// Examples are Segment's own (segment.com/docs/connections/spec: track, identify, page, screen,
// group, alias, common fields and the e-commerce spec v2), trimmed to the mapped fields.
import assert from "node:assert/strict";
import { checkEvent } from "../../../lib/engine/engine.ts";
import {
  identifyUpdate,
  parseSegmentMessage,
  segmentEventId,
  segmentTimestamp,
} from "../../../lib/ingest/segment_spec.ts";

const receivedAt = new Date("2015-02-23T22:28:55.387Z");
const opts = { receivedAt, check: checkEvent };

function mapOk(raw: unknown, type?: "track" | "identify" | "page" | "screen" | "group" | "alias") {
  const r = parseSegmentMessage(raw, { ...opts, type });
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  for (const event of r.mapped.events) {
    assert.equal(checkEvent({ id: "x", ...event }), null, JSON.stringify(event));
  }
  return r.mapped;
}

Deno.test("track: Order Completed (e-commerce v2) maps to checkout_completed", () => {
  const m = mapOk({
    type: "track",
    userId: "97980cfea0067",
    event: "Order Completed",
    properties: { order_id: "50314b8e9bcf000000000000", total: 27.5, currency: "USD" },
  });
  assert.equal(m.source, "server");
  const [e] = m.events;
  assert.equal(e!.eventType, "checkout_completed");
  assert.equal(e!.profileId, "97980cfea0067");
  assert.equal(e!.properties!.orderId, "50314b8e9bcf000000000000");
  assert.equal(e!.properties!.currencyCode, "USD");
  assert.equal(e!.properties!.event, "Order Completed");
});

Deno.test("track: every mapped e-commerce name maps to its catalog type", () => {
  const cases: [string, string, Record<string, unknown>][] = [
    ["Product Viewed", "product_viewed", { product_id: "507f1f77bcf86cd799439011", price: 18.99 }],
    ["Product Added", "product_added_to_cart", { product_id: "507f1f77", quantity: 1 }],
    ["Cart Viewed", "cart_viewed", { cart_id: "d92jd29jd92jd29j92d92jd" }],
    ["Checkout Started", "checkout_started", { order_id: "50314b8e", value: 30 }],
    ["Products Searched", "search_submitted", { query: "blue roses" }],
    ["Order Refunded", "refund_issued", { order_id: "50314b8e9bcf000000000000" }],
  ];
  for (const [name, type, properties] of cases) {
    const m = mapOk({ type: "track", userId: "u1", event: name, properties });
    assert.equal(m.events[0]!.eventType, type, name);
  }
});

Deno.test("track: another name is stored as `track` with its name kept", () => {
  const m = mapOk({
    type: "track",
    userId: "019mr8mf4r",
    event: "Item Purchased",
    properties: { name: "Leap to Conclusions Mat", revenue: 14.99 },
    context: { ip: "24.5.68.47" },
  });
  assert.equal(m.events[0]!.eventType, "track");
  assert.equal(m.events[0]!.properties!.event, "Item Purchased");
  assert.deepEqual(m.events[0]!.properties!.context, { ip: "24.5.68.47" });
});

Deno.test("track: a mapped name whose properties the catalog refuses falls back to track", () => {
  const m = mapOk({ type: "track", userId: "u1", event: "Order Refunded", properties: {} });
  assert.equal(m.events[0]!.eventType, "track");
});

Deno.test("anonymousId only: an anonymous (pixel) profile", () => {
  const m = mapOk({ anonymousId: "507f191e810c19729de860ea", event: "Signed Up" }, "track");
  assert.equal(m.source, "pixel");
  assert.equal(m.events[0]!.profileId, "507f191e810c19729de860ea");
  assert.equal(m.events[0]!.target, undefined);
});

Deno.test("userId and anonymousId: the anonymous profile is merged (target profile)", () => {
  const m = mapOk({
    type: "identify",
    anonymousId: "507f191e810c19729de860ea",
    userId: "97980cfea0067",
    traits: { email: "peter@example.com" },
  });
  assert.equal(m.source, "server");
  assert.deepEqual(m.events[0]!.target, {
    itemId: "507f191e810c19729de860ea",
    itemType: "profile",
  });
});

Deno.test("identify: reserved traits become identity fields, the rest keep their names", () => {
  const update = identifyUpdate({
    name: "Peter Gibbons",
    email: "peter@example.com",
    first_name: "Peter",
    lastName: "Gibbons",
    phone: "555-555-5555",
    plan: "premium",
    logins: 5,
    address: { city: "San Francisco", country: "USA", postalCode: "94103" },
  });
  assert.equal(update["properties.email"], "peter@example.com");
  assert.equal(update["properties.firstName"], "Peter");
  assert.equal(update["properties.lastName"], "Gibbons");
  assert.equal(update["properties.phoneNumber"], "555-555-5555");
  assert.equal(update["properties.city"], "San Francisco");
  assert.equal(update["properties.countryName"], "USA");
  assert.equal(update["properties.zipCode"], "94103");
  assert.equal(update["properties.plan"], "premium");
  assert.equal(update["properties.logins"], 5);
  const m = mapOk({ type: "identify", userId: "97980cfea0067", traits: { email: "a@b.c" } });
  assert.equal(m.events[0]!.eventType, "updateProperties");
});

Deno.test("page and screen: page_viewed and screen_viewed with url, path, title, referrer", () => {
  const page = mapOk({
    type: "page",
    userId: "019mr8mf4r",
    name: "Pricing",
    properties: { title: "Segment Pricing", url: "https://segment.com/pricing", path: "/pricing" },
    context: { page: { referrer: "https://segment.com/warehouses" } },
  });
  const p = page.events[0]!.properties!;
  assert.equal(page.events[0]!.eventType, "page_viewed");
  assert.equal(p.url, "https://segment.com/pricing");
  assert.equal(p.referrer, "https://segment.com/warehouses");
  assert.equal(p.name, "Pricing");
  const screen = mapOk({ type: "screen", userId: "u1", name: "Home" });
  assert.equal(screen.events[0]!.eventType, "screen_viewed");
  assert.equal(screen.events[0]!.properties!.name, "Home");
});

Deno.test("group: recorded on the profile as groupId and groupTraits", () => {
  const m = mapOk({
    type: "group",
    userId: "97980cfea0067",
    groupId: "0e8c78ea9d97a7b8185e8632",
    traits: { name: "Initech", industry: "Technology" },
  });
  assert.deepEqual(m.events[0]!.properties!.update, {
    "properties.groupId": "0e8c78ea9d97a7b8185e8632",
    "properties.groupTraits": { name: "Initech", industry: "Technology" },
  });
});

Deno.test("alias: previousId merged into userId", () => {
  const m = mapOk({ type: "alias", previousId: "39239-239239-239239-23923", userId: "507f191e81" });
  assert.equal(m.events[0]!.eventType, "alias");
  assert.deepEqual(m.events[0]!.target, {
    itemId: "39239-239239-239239-23923",
    itemType: "profile",
  });
  const noUser = parseSegmentMessage({ type: "alias", previousId: "a", anonymousId: "b" }, opts);
  assert.equal(noUser.ok, false);
});

Deno.test("timestamp: corrected for skew, receivedAt - (sentAt - timestamp)", () => {
  // The client's clock is 10 s ahead; the event happened 2 s before it was sent.
  assert.equal(
    segmentTimestamp({
      timestamp: "2015-02-23T22:29:07.387Z",
      sentAt: "2015-02-23T22:29:05.387Z",
    }, receivedAt),
    "2015-02-23T22:28:57.387Z",
  );
  // RudderStack's originalTimestamp is read the same way.
  assert.equal(
    segmentTimestamp({
      originalTimestamp: "2015-02-23T22:28:53.387Z",
      sentAt: "2015-02-23T22:28:55.387Z",
    }, receivedAt),
    "2015-02-23T22:28:53.387Z",
  );
  assert.equal(segmentTimestamp({}, receivedAt), receivedAt.toISOString());
});

Deno.test("invalid messages answer their reason", () => {
  const none = parseSegmentMessage({ type: "track", event: "X" }, opts);
  assert.equal(none.ok, false);
  const colon = parseSegmentMessage({ type: "track", event: "X", userId: "a:b" }, opts);
  assert.ok(!colon.ok && colon.errors[0]!.path === "$.userId");
  const unknown = parseSegmentMessage({ type: "nope", userId: "a" }, opts);
  assert.equal(unknown.ok, false);
  const noEvent = parseSegmentMessage({ userId: "a" }, { ...opts, type: "track" });
  assert.equal(noEvent.ok, false);
});

Deno.test("messageId: the event id; a long one hashed to a stable id", async () => {
  assert.equal(await segmentEventId("ajs-next-1"), "ajs-next-1");
  const long = "x".repeat(100);
  const id = await segmentEventId(long);
  assert.equal(id, await segmentEventId(long));
  assert.ok(id!.length <= 64);
  assert.equal(await segmentEventId(undefined), undefined);
});
