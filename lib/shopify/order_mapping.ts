/**
 * Shopify webhook payloads (REST shape) to the normalized order, subscription and customer lines
 * of lib/commerce/order_lines.ts. Pure functions: no I/O. The tables below are the contract.
 *
 * Order state, first rule that matches:
 *
 * | Shopify                                                 | state       |
 * | ------------------------------------------------------- | ----------- |
 * | `cancelled_at` set (any financial status)               | `cancelled` |
 * | `financial_status` `paid`, `partially_refunded`          | `complete`  |
 * | `financial_status` `refunded`, `voided`                 | `cancelled` |
 * | `financial_status` `pending`, `authorized`, `partially_paid`, `expired`, or unknown | `pending` |
 * | no `financial_status` (absent, null, empty)             | `draft`     |
 *
 * `fulfillment_status` never changes the state: a paid and fulfilled order stays `complete`, so
 * it keeps counting toward insights (`delivered` is never produced from a webhook).
 *
 * Billing status, from `financial_status` alone (cancellation does not change it):
 *
 * | `financial_status`                     | billing_status |
 * | -------------------------------------- | -------------- |
 * | `paid`, `partially_refunded`           | `complete`     |
 * | `authorized`, `partially_paid`         | `processing`   |
 * | `pending`, absent, unknown             | `billable`     |
 * | `refunded`, `voided`, `expired`        | `on_hold`      |
 *
 * @module
 */
import type { z } from "zod";
import { DomainError } from "../errors.ts";
import {
  type BILLING_STATUSES,
  CustomerSchema,
  type ORDER_STATES,
  type OrderLine,
  OrderLineSchema,
  SUBSCRIPTION_STATUSES,
  type SubscriptionLine,
  SubscriptionLineSchema,
} from "../commerce/order_lines.ts";

type _State = (typeof ORDER_STATES)[number];
type _Billing = (typeof BILLING_STATUSES)[number];
type _Customer = OrderLine["customer"];

/** A JSON object from a webhook body. */
export type Payload = Record<string, unknown>;

/**
 * Parses a webhook body. Shopify ids are 64-bit integers sent as JSON numbers, and past 2^53
 * `JSON.parse` would round them; an integer out of the safe range is kept as its exact digits
 * (a string) instead. Throws a SyntaxError on malformed JSON.
 */
export function parseShopifyJson(text: string): unknown {
  const reviver = (_key: string, value: unknown, context?: { source?: string }) =>
    typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value) &&
      typeof context?.source === "string" && /^-?\d+$/.test(context.source)
      ? context.source
      : value;
  return JSON.parse(text, reviver as (key: string, value: unknown) => unknown);
}

/** The state and billing status of a Shopify order (the tables at the top of this file). */
export function mapOrderStatus(order: {
  cancelled_at?: unknown;
  financial_status?: unknown;
}): { state: _State; billing_status: _Billing } {
  const financial = typeof order.financial_status === "string"
    ? order.financial_status.trim().toLowerCase()
    : "";
  return {
    state: _state(financial, _present(order.cancelled_at)),
    billing_status: _billing(financial),
  };
}

function _state(financial: string, cancelled: boolean): _State {
  if (cancelled) return "cancelled";
  switch (financial) {
    case "paid":
    case "partially_refunded":
      return "complete";
    case "refunded":
    case "voided":
      return "cancelled";
    case "":
      return "draft";
    default:
      return "pending";
  }
}

function _billing(financial: string): _Billing {
  switch (financial) {
    case "paid":
    case "partially_refunded":
      return "complete";
    case "authorized":
    case "partially_paid":
      return "processing";
    case "refunded":
    case "voided":
    case "expired":
      return "on_hold";
    default:
      return "billable";
  }
}

/**
 * Maps an order webhook payload to an order line:
 *
 * | normalized               | Shopify order payload                                           |
 * | ------------------------ | --------------------------------------------------------------- |
 * | `external_id`            | `id` (else the number of `admin_graphql_api_id`)                 |
 * | `number`                 | `name` (`#1001`), else `order_number`                           |
 * | `total`                  | `total_price` (rounded to 2 decimals if it has more)            |
 * | `currency_code`          | `currency`                                                      |
 * | `created_at`, `processed_at`, `updated_at` | the same fields                               |
 * | `recovered_at`           | null (not in the payload; a stored value is kept)               |
 * | `customer.shopify_customer_id` | `customer.id`                                             |
 * | `customer.email`         | `customer.email`, else `email`, else `contact_email`            |
 * | `customer.phone`         | `customer.phone`, else `phone`                                  |
 * | `customer.first_name`, `last_name` | `customer.first_name`, `customer.last_name`           |
 * | `line_items[]`           | `title` (else `name`), `quantity`, `price`, `sku`, `product_id`, `variant_id`, `variant_title` |
 *
 * Throws 400 `bad_request` naming each field the payload lacks or gets wrong.
 */
export function mapShopifyOrder(payload: Payload): OrderLine {
  const customer = _object(payload.customer);
  const candidate = {
    external_id: _id(payload.id) ?? _gidNumber(payload.admin_graphql_api_id),
    number: _text(payload.name) ??
      (_id(payload.order_number) ? `#${_id(payload.order_number)}` : undefined),
    ...mapOrderStatus(payload),
    total: shopifyMoney(payload.total_price),
    currency_code: payload.currency,
    created_at: payload.created_at,
    processed_at: payload.processed_at ?? null,
    updated_at: payload.updated_at ?? null,
    recovered_at: null,
    customer: _orderCustomer(payload, customer),
    line_items: Array.isArray(payload.line_items)
      ? payload.line_items.map((raw) => {
        const item = _object(raw) ?? {};
        return {
          title: _text(item.title) ?? _text(item.name) ?? "",
          quantity: item.quantity,
          price: shopifyMoney(item.price),
          sku: _text(item.sku) ?? null,
          product_id: _id(item.product_id) ?? null,
          variant_id: _id(item.variant_id) ?? null,
          variant_title: _text(item.variant_title) ?? null,
        };
      })
      : [],
  };
  return _parse(OrderLineSchema, candidate, "order");
}

function _orderCustomer(payload: Payload, customer: Payload | null): _Customer {
  const mapped = {
    shopify_customer_id: _id(customer?.id) ?? null,
    email: _text(customer?.email) ?? _text(payload.email) ?? _text(payload.contact_email) ?? null,
    phone: _text(customer?.phone) ?? _text(payload.phone) ?? null,
    first_name: _text(customer?.first_name) ?? null,
    last_name: _text(customer?.last_name) ?? null,
  };
  return mapped.shopify_customer_id || mapped.email || mapped.phone ? mapped : null;
}

/**
 * Maps a `customers/create` or `customers/update` payload (a Shopify customer) to the customer
 * of an import line: `id` → `shopify_customer_id`, `email`, `phone`, `first_name`, `last_name`.
 */
export function mapShopifyCustomer(
  payload: Payload,
): NonNullable<_Customer> & { shopify_customer_id: string } {
  const id = _id(payload.id) ?? _gidNumber(payload.admin_graphql_api_id);
  const customer = _parse(CustomerSchema, {
    shopify_customer_id: id,
    email: _text(payload.email) ?? null,
    phone: _text(payload.phone) ?? null,
    first_name: _text(payload.first_name) ?? null,
    last_name: _text(payload.last_name) ?? null,
  }, "customer");
  if (!customer.shopify_customer_id) {
    throw new DomainError("invalid_input", "customer.id: Required");
  }
  return { ...customer, shopify_customer_id: customer.shopify_customer_id };
}

/**
 * Maps a `subscription_contracts/create` or `/update` payload to a subscription line:
 *
 * | normalized          | Shopify subscription contract payload                                |
 * | ------------------- | -------------------------------------------------------------------- |
 * | `external_id`       | `id`, else the number of `admin_graphql_api_id`                       |
 * | `status`            | `status` lower-cased (`ACTIVE` → `active`, `PAUSED`, `CANCELLED`, `EXPIRED`, `FAILED`) |
 * | `next_billing_date` | `next_billing_date` (or `nextBillingDate`), else null                |
 * | `customer`          | `customer_id` (else the number of `admin_graphql_api_customer_id`, else `customer.id`); `customer.email` |
 */
export function mapShopifySubscription(payload: Payload): SubscriptionLine {
  const customer = _object(payload.customer);
  const shopifyCustomerId = _id(payload.customer_id) ??
    _gidNumber(payload.admin_graphql_api_customer_id) ?? _id(customer?.id) ?? null;
  const email = _text(customer?.email) ?? null;
  const status = typeof payload.status === "string" ? payload.status.trim().toLowerCase() : "";
  return _parse(SubscriptionLineSchema, {
    external_id: _id(payload.id) ?? _gidNumber(payload.admin_graphql_api_id),
    status: (SUBSCRIPTION_STATUSES as readonly string[]).includes(status) ? status : payload.status,
    next_billing_date: payload.next_billing_date ?? payload.nextBillingDate ?? null,
    customer: shopifyCustomerId || email ? { shopify_customer_id: shopifyCustomerId, email } : null,
  }, "subscription");
}

/** A Shopify id (a JSON number, or digits as a string) as a string; undefined when absent. */
export function shopifyId(value: unknown): string | undefined {
  return _id(value);
}

/** The numeric id at the end of a `gid://shopify/<Type>/<id>` (query string ignored). */
function _gidNumber(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  return /^gid:\/\/shopify\/[A-Za-z]+\/(\d+)(\?.*)?$/.exec(value)?.[1];
}

function _id(value: unknown): string | undefined {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value === "string" && /^\d{1,20}$/.test(value.trim())) return value.trim();
  return undefined;
}

function _text(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const text = value.trim();
  return text === "" ? undefined : text;
}

function _present(value: unknown): boolean {
  return value !== undefined && value !== null && value !== "" && value !== false;
}

function _object(value: unknown): Payload | null {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? value as Payload
    : null;
}

/**
 * A money string with at most 2 decimals. Shopify sends 3-decimal currencies (KWD, BHD, ...) with
 * 3 decimals; the store keeps cents, so extra decimals are rounded half away from zero, on the
 * digits (never through a float). Anything that is not a decimal is returned unchanged for the
 * schema to reject.
 */
export function shopifyMoney(value: unknown): unknown {
  const text = typeof value === "number" ? String(value) : value;
  if (typeof text !== "string") return value;
  const match = /^(-?)(\d+)\.(\d{3,})$/.exec(text.trim());
  if (!match) return text;
  const [, sign, whole, fraction] = match as unknown as [string, string, string, string];
  let cents = BigInt(whole + fraction.slice(0, 2));
  if (Number(fraction[2]) >= 5) cents += 1n;
  const digits = cents.toString().padStart(3, "0");
  const rounded = `${digits.slice(0, -2)}.${digits.slice(-2)}`;
  return cents === 0n ? rounded : `${sign}${rounded}`;
}

function _parse<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) =>
    `${[what, ...issue.path.map(String)].join(".")}: ${issue.message}`
  );
  throw new DomainError("invalid_input", `payload does not map: ${problems.join("; ")}`);
}
