import assert from "node:assert/strict";
import {
  EVENT_TYPES,
  eventPropertiesSchema,
  eventTypeSummary,
  findEventType,
} from "../../../lib/engine/event_types.ts";
import { SPEC_EVENT_TYPES } from "../../test_support.ts";

function schemaOf(name: string) {
  const def = findEventType(name);
  assert.ok(def, `no event type ${name}`);
  return eventPropertiesSchema(def);
}

Deno.test("event types: every name the contract lists is present exactly once", () => {
  const names = EVENT_TYPES.map((def) => def.name);
  for (const name of SPEC_EVENT_TYPES) {
    assert.equal(names.filter((n) => n === name).length, 1, name);
  }
});

Deno.test("event types: names are unique and each definition is complete", () => {
  const names = EVENT_TYPES.map((def) => def.name);
  assert.equal(new Set(names).size, names.length);
  for (const def of EVENT_TYPES) {
    assert.match(def.name, /^[A-Za-z][A-Za-z_]*$/, def.name);
    assert.ok(["pixel", "server", "identity", "native"].includes(def.category), def.name);
    assert.ok(def.title.length > 0 && def.description.length > 0, def.name);
    assert.match(def.version, /^\d+\.\d+\.\d+$/, def.name);
    for (const [property, spec] of Object.entries(def.properties)) {
      assert.ok(spec.description.length > 0, `${def.name}.${property}`);
    }
  }
});

Deno.test("eventTypeSummary: the catalog entry shape", () => {
  for (const def of EVENT_TYPES) {
    const summary = eventTypeSummary(def);
    assert.deepEqual(Object.keys(summary).sort(), [
      "description",
      "name",
      "schema",
      "source",
      "title",
    ]);
    assert.equal(summary.name, def.name);
    assert.equal(summary.source, "built-in");
    assert.equal(summary.title, def.title);
    assert.equal(summary.schema.version, def.version);
    assert.ok(summary.schema.$id.includes(def.name), summary.schema.$id);
    assert.ok(summary.schema.$id.includes(def.version), summary.schema.$id);
    assert.deepEqual(summary.schema.required.slice(0, 2), ["eventType", "profileId"]);
    for (const [key, description] of Object.entries(summary.schema.properties)) {
      assert.equal(typeof description, "string", `${def.name} ${key}`);
      assert.ok(description.length > 0, `${def.name} ${key}`);
    }
    for (const required of summary.schema.required) {
      assert.ok(required in summary.schema.properties, `${def.name}: ${required} undescribed`);
    }
    assert.equal(summary.schema.properties.eventType, `Constant: ${def.name}`);
    for (const property of Object.keys(def.properties)) {
      assert.ok(`properties.${property}` in summary.schema.properties, `${def.name}.${property}`);
    }
  }
});

Deno.test("eventTypeSummary: required properties are listed after the envelope fields", () => {
  const order = eventTypeSummary(findEventType("order_created")!);
  assert.deepEqual(order.schema.required, ["eventType", "profileId", "properties.orderId"]);
  const page = eventTypeSummary(findEventType("page_viewed")!);
  assert.deepEqual(page.schema.required, ["eventType", "profileId"]);
  const consent = eventTypeSummary(findEventType("modifyConsent")!);
  assert.deepEqual(consent.schema.required, ["eventType", "profileId", "properties.consent"]);
});

Deno.test("eventPropertiesSchema: accepts valid payloads", () => {
  const valid: [string, unknown][] = [
    ["search_submitted", { query: "red shoes", resultCount: 12 }],
    ["page_viewed", {}],
    ["page_viewed", { url: "https://acme.example/p", title: "P", referrer: "" }],
    ["product_added_to_cart", {
      productId: 123,
      variantId: "gid://1",
      price: "19.99",
      quantity: 2,
    }],
    ["order_created", { orderId: "1001", total: 42.5, currencyCode: "EUR", lineItems: [{ a: 1 }] }],
    ["consent_updated", { consentType: "email_marketing", state: "granted" }],
    ["modifyConsent", { consent: { typeIdentifier: "newsletter", status: "GRANTED" } }],
    ["checkout_abandoned", { abandonedAt: "2026-11-21T12:00:00Z" }],
    ["updateProperties", { update: { "properties.email": "a@b.c" }, targetType: "profile" }],
  ];
  for (const [name, payload] of valid) {
    const result = schemaOf(name).safeParse(payload);
    assert.ok(result.success, `${name}: ${JSON.stringify(result.error?.issues)}`);
  }
});

Deno.test("eventPropertiesSchema: rejects missing required properties and wrong types", () => {
  const invalid: [string, unknown, string][] = [
    ["search_submitted", {}, "query"],
    ["search_submitted", { query: 5 }, "query"],
    ["search_submitted", { query: "x", resultCount: -1 }, "resultCount"],
    ["modifyConsent", {}, "consent"],
    ["modifyConsent", { consent: { typeIdentifier: "newsletter", status: "MAYBE" } }, "consent"],
    ["modifyConsent", { consent: { status: "GRANTED" } }, "consent"],
    ["order_created", { total: 1 }, "orderId"],
    ["order_created", { orderId: "1", currencyCode: "usd" }, "currencyCode"],
    ["product_viewed", { price: "12,50" }, "price"],
    ["product_viewed", { quantity: 1.5 }, "quantity"],
    ["consent_updated", { consentType: "sms", state: "maybe" }, "state"],
    ["checkout_abandoned", { abandonedAt: "yesterday" }, "abandonedAt"],
    ["updateProperties", { targetType: "session" }, "targetType"],
    ["page_viewed", { url: "x".repeat(2049) }, "url"],
  ];
  for (const [name, payload, path] of invalid) {
    const result = schemaOf(name).safeParse(payload);
    assert.equal(result.success, false, `${name} accepted ${JSON.stringify(payload)}`);
    assert.equal(
      result.error?.issues[0]?.path[0],
      path,
      `${name}: ${JSON.stringify(result.error)}`,
    );
  }
});

Deno.test("eventPropertiesSchema: extra keys are allowed and kept", () => {
  const payload = { query: "x", campaign: { id: 7 }, utm_source: "mail" };
  const result = schemaOf("search_submitted").safeParse(payload);
  assert.ok(result.success);
  assert.deepEqual(result.data, payload);
  const consent = schemaOf("modifyConsent").safeParse({
    consent: { typeIdentifier: "t", status: "REVOKED", revokeDate: "2026-01-01" },
    note: "extra",
  });
  assert.ok(consent.success);
});

Deno.test("findEventType: known names resolve, anything else is undefined", () => {
  assert.equal(findEventType("page_viewed")?.name, "page_viewed");
  assert.equal(findEventType("modifyConsent")?.category, "native");
  for (const name of ["nope", "", "Page_Viewed", "constructor", "__proto__", "toString"]) {
    assert.equal(findEventType(name), undefined, name);
  }
});
