import assert from "node:assert/strict";
import { money, OrderLineSchema, parseOrderLineFast } from "../../../lib/commerce/order_lines.ts";

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

Deno.test("parseOrderLineFast: accepts only what OrderLineSchema accepts, with the same output", () => {
  const base = {
    external_id: "820982911946154508",
    number: "#1001",
    state: "complete",
    billing_status: "complete",
    total: "199.99",
    currency_code: "USD",
    created_at: "2026-01-02T03:04:05Z",
    processed_at: null,
    updated_at: "2026-01-02T03:04:05.123+05:30",
    recovered_at: null,
    customer: {
      shopify_customer_id: "207119551",
      email: "Bob@Example.com",
      phone: "+1 613 555 1111",
      first_name: "Bob",
      last_name: "Norman",
    },
    line_items: [{
      title: "Tee",
      quantity: 2,
      price: "30.00",
      sku: "TEE-M",
      product_id: "632910392",
      variant_id: 808950810,
      variant_title: "M",
    }],
  };
  const candidates: unknown[] = [
    undefined,
    null,
    true,
    0,
    -0,
    1,
    7.5,
    -1,
    2 ** 53,
    1e21,
    199.99,
    0.1,
    [],
    {},
    [{}],
    "",
    " ",
    "a",
    "a".repeat(100),
    "a".repeat(101),
    "a".repeat(200),
    "a".repeat(201),
    "a".repeat(255),
    "a".repeat(256),
    "a".repeat(320),
    "a".repeat(321),
    "a".repeat(500),
    "a".repeat(501),
    "😀".repeat(128),
    "😀".repeat(251),
    "199.99",
    " 199.99 ",
    "1.999",
    "-5",
    "1e3",
    "12.",
    ".5",
    "1".repeat(15),
    "1".repeat(16),
    "USD",
    "usd",
    "US",
    "complete",
    "pending",
    "cancelled",
    "shipped",
    "billable",
    "on_hold",
    "2026-01-02T03:04:05Z",
    "2024-02-29T00:00:00Z",
    "2026-02-29T00:00:00Z",
    "2026-01-02T03:04:05.123456789-08:00",
    "2026-01-02T03:04:05",
    "2026-01-02 03:04:05Z",
    "2026-01-02T24:00:00Z",
    "2026-01-02T03:04:05+0530",
    "2026-01-02T03:04Z",
    "2026-13-02T03:04:05Z",
    "2026-01-02",
  ];
  const paths: (string | number)[][] = [
    ...Object.keys(base).map((key) => [key]),
    ["extra"],
    ...Object.keys(base.customer).map((key) => ["customer", key]),
    ["customer", "extra"],
    ["line_items", 0],
    ...Object.keys(base.line_items[0]!).map((key) => ["line_items", 0, key]),
    ["line_items", 0, "extra"],
  ];
  let accepted = 0;
  let fast = 0;
  const check = (line: unknown) => {
    const expected = OrderLineSchema.safeParse(line);
    const actual = parseOrderLineFast(line);
    if (expected.success) accepted++;
    if (actual === undefined) return;
    fast++;
    assert.ok(expected.success, `fast path accepted what zod refuses: ${JSON.stringify(line)}`);
    assert.deepStrictEqual(actual, expected.data, JSON.stringify(line));
  };
  check(base);
  assert.equal(fast, 1, "the documented line takes the fast path");
  check({ ...base, customer: undefined, line_items: undefined });
  check({ ...base, line_items: Array.from({ length: 1001 }, () => base.line_items[0]) });
  for (const path of paths) {
    for (const value of candidates) {
      const line = structuredClone(base) as Record<string | number, unknown>;
      let node = line;
      for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
      const key = path.at(-1)!;
      if (value === undefined) delete node[key];
      else node[key] = structuredClone(value);
      check(line);
    }
  }
  // The fast path is the common one: most lines zod accepts take it.
  assert.ok(fast > accepted * 0.8, `${fast} fast of ${accepted} accepted`);
});
