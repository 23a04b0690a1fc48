/**
 * Order and subscription lines as they arrive (an import's NDJSON, a mapped Shopify webhook):
 * their states, their zod schemas, and a fast parser for the common shape of an order line.
 *
 * @module
 */
import { z } from "zod";

/** Order states and billing statuses. */
export const ORDER_STATES = ["pending", "draft", "complete", "delivered", "cancelled"] as const;
export const BILLING_STATUSES = ["billable", "processing", "complete", "on_hold"] as const;
/** Subscription contract statuses. */
export const SUBSCRIPTION_STATUSES = [
  "active",
  "paused",
  "cancelled",
  "expired",
  "failed",
] as const;

const _MONEY = /^-?\d{1,15}(\.\d{1,2})?$/;
const _CURRENCY = /^[A-Z]{3}$/;
const _money = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const text = typeof value === "number" ? String(value) : value.trim();
  if (!_MONEY.test(text)) {
    ctx.addIssue({ code: "custom", message: "must be a decimal amount with at most 2 decimals" });
    return z.NEVER;
  }
  return text;
});
const _timestamp = z.iso.datetime({ offset: true });
const _id = z.union([z.string().min(1).max(255), z.number().int().nonnegative()]).transform(String);

/** The customer part of an import line. */
export const CustomerSchema = z.object({
  shopify_customer_id: _id.optional().nullable(),
  email: z.string().max(320).optional().nullable(),
  phone: z.string().max(40).optional().nullable(),
  first_name: z.string().max(200).optional().nullable(),
  last_name: z.string().max(200).optional().nullable(),
});

/** One order line of `orders import`. */
export const OrderLineSchema = z.object({
  external_id: _id,
  number: z.string().min(1).max(100),
  state: z.enum(ORDER_STATES),
  billing_status: z.enum(BILLING_STATUSES),
  total: _money,
  currency_code: z.string().regex(_CURRENCY, "must be an ISO 4217 code"),
  created_at: _timestamp,
  processed_at: _timestamp.optional().nullable(),
  updated_at: _timestamp.optional().nullable(),
  recovered_at: _timestamp.optional().nullable(),
  customer: CustomerSchema.optional().nullable(),
  line_items: z.array(z.object({
    title: z.string().max(500),
    quantity: z.number().int().min(0),
    price: _money,
    sku: z.string().max(255).optional().nullable(),
    product_id: _id.optional().nullable(),
    variant_id: _id.optional().nullable(),
    variant_title: z.string().max(500).optional().nullable(),
  })).max(1000).optional().default([]),
});

/**
 * `OrderLineSchema`'s answer for the common shape of a line, without zod's per-field overhead
 * (most of an import's validation time): the parsed line, or undefined to let the schema decide
 * and word the errors. It accepts only what the schema accepts, with the same output
 * (tests/lib/commerce/order_lines_test.ts compares the two over many valid and broken lines).
 */
export function parseOrderLineFast(raw: unknown): OrderLine | undefined {
  if (!_isRecord(raw)) return undefined;
  const externalId = _fastId(raw.external_id);
  const total = _fastMoney(raw.total);
  const number = raw.number;
  if (
    externalId === undefined || total === undefined || typeof number !== "string" ||
    number.length === 0 || number.length > 100 ||
    !(ORDER_STATES as readonly unknown[]).includes(raw.state) ||
    !(BILLING_STATUSES as readonly unknown[]).includes(raw.billing_status) ||
    typeof raw.currency_code !== "string" || !_CURRENCY.test(raw.currency_code) ||
    !_fastTimestamp(raw.created_at)
  ) return undefined;
  // Each field is named rather than looped over: keyed access by a variable key is several
  // times slower, and this runs for every line of an import.
  const line: Partial<OrderLine> = {
    external_id: externalId,
    number,
    state: raw.state as OrderLine["state"],
    billing_status: raw.billing_status as OrderLine["billing_status"],
    total,
    currency_code: raw.currency_code,
    created_at: raw.created_at as string,
  };
  if ("processed_at" in raw) {
    if (!_fastOptionalTimestamp(raw.processed_at)) return undefined;
    line.processed_at = raw.processed_at;
  }
  if ("updated_at" in raw) {
    if (!_fastOptionalTimestamp(raw.updated_at)) return undefined;
    line.updated_at = raw.updated_at;
  }
  if ("recovered_at" in raw) {
    if (!_fastOptionalTimestamp(raw.recovered_at)) return undefined;
    line.recovered_at = raw.recovered_at;
  }
  if ("customer" in raw) {
    const customer = raw.customer === null ? null : _fastCustomer(raw.customer);
    if (customer === undefined) return undefined;
    line.customer = customer;
  }
  const items = raw.line_items === undefined ? [] : raw.line_items;
  if (!Array.isArray(items) || items.length > 1000) return undefined;
  const parsed = [];
  for (const item of items) {
    const value = _fastItem(item);
    if (value === undefined) return undefined;
    parsed.push(value);
  }
  line.line_items = parsed;
  return line as OrderLine;
}

function _isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    Object.getPrototypeOf(value) === Object.prototype;
}

// String lengths are counted in UTF-16 units here: never fewer than the code points zod counts,
// so a string within a limit here is within it for zod too.
function _fastText(value: unknown, max: number): value is string | null {
  return value === null || (typeof value === "string" && value.length <= max);
}

function _fastId(value: unknown): string | undefined {
  if (typeof value === "string") {
    return value.length >= 1 && value.length <= 255 ? value : undefined;
  }
  return Number.isSafeInteger(value) && (value as number) >= 0 ? String(value) : undefined;
}

function _fastOptionalId(value: unknown): string | null | undefined {
  return value === null ? null : _fastId(value);
}

function _fastMoney(value: unknown): string | undefined {
  const text = typeof value === "number"
    ? String(value)
    : typeof value === "string"
    ? value.trim()
    : undefined;
  return text !== undefined && _MONEY.test(text) ? text : undefined;
}

function _fastTimestamp(value: unknown): boolean {
  return typeof value === "string" && _timestamp.def.pattern!.test(value);
}

function _fastOptionalTimestamp(value: unknown): value is string | null {
  return value === null || _fastTimestamp(value);
}

function _fastCustomer(value: unknown): CustomerLine | undefined {
  if (!_isRecord(value)) return undefined;
  const customer: CustomerLine = {};
  if ("shopify_customer_id" in value) {
    const id = _fastOptionalId(value.shopify_customer_id);
    if (id === undefined) return undefined;
    customer.shopify_customer_id = id;
  }
  if ("email" in value) {
    if (!_fastText(value.email, 320)) return undefined;
    customer.email = value.email;
  }
  if ("phone" in value) {
    if (!_fastText(value.phone, 40)) return undefined;
    customer.phone = value.phone;
  }
  if ("first_name" in value) {
    if (!_fastText(value.first_name, 200)) return undefined;
    customer.first_name = value.first_name;
  }
  if ("last_name" in value) {
    if (!_fastText(value.last_name, 200)) return undefined;
    customer.last_name = value.last_name;
  }
  return customer;
}

function _fastItem(value: unknown): OrderLine["line_items"][number] | undefined {
  if (!_isRecord(value)) return undefined;
  const price = _fastMoney(value.price);
  const { title, quantity } = value;
  if (
    typeof title !== "string" || title.length > 500 || price === undefined ||
    !Number.isSafeInteger(quantity) || (quantity as number) < 0
  ) return undefined;
  const item: OrderLine["line_items"][number] = { title, quantity: quantity as number, price };
  if ("sku" in value) {
    if (!_fastText(value.sku, 255)) return undefined;
    item.sku = value.sku;
  }
  if ("product_id" in value) {
    const id = _fastOptionalId(value.product_id);
    if (id === undefined) return undefined;
    item.product_id = id;
  }
  if ("variant_id" in value) {
    const id = _fastOptionalId(value.variant_id);
    if (id === undefined) return undefined;
    item.variant_id = id;
  }
  if ("variant_title" in value) {
    if (!_fastText(value.variant_title, 500)) return undefined;
    item.variant_title = value.variant_title;
  }
  return item;
}

/** One subscription line of `subscriptions import`. */
export const SubscriptionLineSchema = z.object({
  external_id: _id,
  status: z.enum(SUBSCRIPTION_STATUSES),
  next_billing_date: _timestamp.or(z.iso.date()).optional().nullable(),
  customer: CustomerSchema.optional().nullable(),
});

export type OrderLine = z.infer<typeof OrderLineSchema>;
export type SubscriptionLine = z.infer<typeof SubscriptionLineSchema>;
/** The customer part of a line. */
export type CustomerLine = z.infer<typeof CustomerSchema>;

/** Renders an exact numeric amount as a 2-decimal string. */
export function money(value: string | number): string {
  const [whole, fraction = ""] = String(value).split(".");
  return `${whole}.${fraction.padEnd(2, "0").slice(0, 2)}`;
}
