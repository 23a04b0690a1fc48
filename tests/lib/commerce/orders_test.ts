import assert from "node:assert/strict";
import {
  money,
  normalizeEmail,
  normalizePhone,
  OrderLineSchema,
} from "../../../lib/commerce/orders.ts";

Deno.test("normalizeEmail: trimmed and lower-cased; not an address is null", () => {
  assert.equal(normalizeEmail("  Bob@Example.COM "), "bob@example.com");
  assert.equal(normalizeEmail("bob"), null);
  assert.equal(normalizeEmail(""), null);
  assert.equal(normalizeEmail(null), null);
});

Deno.test("normalizePhone: E.164 from common international spellings; ambiguous is null", () => {
  for (
    const input of [
      "+1 613 555 1111",
      "+1-613-555-1111",
      "(+1) 613.555.1111",
      "0016135551111",
      "+16135551111",
    ]
  ) {
    assert.equal(normalizePhone(input), "+16135551111", input);
  }
  assert.equal(normalizePhone("+44 20 7946 0958"), "+442079460958");
  for (
    const input of ["613-555-1111", "+0 123 456 789", "+1 555", "+1 613 555 1111 ext 2", "", null]
  ) {
    assert.equal(normalizePhone(input), null, String(input));
  }
});

Deno.test("money: exact 2-decimal strings", () => {
  assert.equal(money("199.9"), "199.90");
  assert.equal(money("200"), "200.00");
  assert.equal(money("0.05"), "0.05");
  assert.equal(money("12345678901234.99"), "12345678901234.99");
});

Deno.test("order lines: required fields, money with at most 2 decimals, known states", () => {
  const line = {
    external_id: 820982911946154508n.toString(),
    number: "#1001",
    state: "complete",
    billing_status: "complete",
    total: "199.99",
    currency_code: "USD",
    created_at: "2026-01-02T03:04:05Z",
  };
  const parsed = OrderLineSchema.parse({ ...line, total: 199.99 });
  assert.equal(parsed.total, "199.99");
  assert.deepEqual(parsed.line_items, []);
  for (
    const bad of [{ total: "1.999" }, { total: "abc" }, { state: "shipped" }, {
      currency_code: "usd",
    }, { created_at: "yesterday" }]
  ) {
    assert.equal(
      OrderLineSchema.safeParse({ ...line, ...bad }).success,
      false,
      JSON.stringify(bad),
    );
  }
  const { number: _number, ...missing } = line;
  assert.equal(OrderLineSchema.safeParse(missing).success, false);
});
