/**
 * The backfill's bulk queries and the mapping of their objects (Admin GraphQL shape) to the lines
 * of lib/commerce/order_lines.ts. Pure functions, no I/O. Ids become the numeric tail of the GIDs,
 * the ids the webhooks carry, so a backfilled order and a later `orders/updated` for it are one
 * order; money stays the decimal string Shopify sends (3-decimal currencies rounded to cents on the
 * digits, as for webhooks).
 *
 * | order line          | GraphQL `Order`                                                     |
 * | ------------------- | ------------------------------------------------------------------- |
 * | `external_id`       | `id` (its number)                                                   |
 * | `number`            | `name`                                                              |
 * | `state`, `billing_status` | `cancelledAt`, `displayFinancialStatus` (the webhook tables) |
 * | `total`             | `totalPriceSet.shopMoney.amount`                                    |
 * | `currency_code`     | `currencyCode`, else the total's `currencyCode`                     |
 * | `created_at`, `processed_at`, `updated_at` | `createdAt`, `processedAt`, `updatedAt`  |
 * | `recovered_at`      | absent: a stored value is kept                                      |
 * | `customer`          | `customer { id email phone firstName lastName }`, else the order's `email`, `phone` |
 * | `line_items[]`      | the `LineItem` children: `title`, `quantity`, `originalUnitPriceSet`, `sku`, `product.id`, `variant.id`, `variantTitle` |
 *
 * @module
 */
import type { CustomerLine } from "../commerce/order_lines.ts";
import { mapOrderStatus, type Payload, shopifyMoney } from "./order_mapping.ts";

/** What a backfill reads: both (customers first), or one. */
export type SyncKind = "orders" | "customers";

const _MONEY = "shopMoney { amount currencyCode }";

/** The `query:` filter of `--since` (a date, `YYYY-MM-DD`): objects created on or after it. */
function _filter(since: string | null): string {
  return since ? `(query: ${JSON.stringify(`created_at:>=${since}`)})` : "";
}

/** The bulk query of a shop's orders with their line items (one connection nested). */
export function ordersBulkQuery(since: string | null): string {
  return `{
  orders${_filter(since)} {
    edges { node {
      id name email phone createdAt updatedAt processedAt cancelledAt closedAt currencyCode
      totalPriceSet { ${_MONEY} }
      subtotalPriceSet { ${_MONEY} }
      totalTaxSet { ${_MONEY} }
      totalDiscountsSet { ${_MONEY} }
      displayFinancialStatus displayFulfillmentStatus
      customer { id email phone firstName lastName }
      lineItems { edges { node {
        id title quantity sku variantTitle
        originalUnitPriceSet { ${_MONEY} }
        variant { id }
        product { id }
      } } }
    } }
  }
}`;
}

/** The bulk query of a shop's customers. */
export function customersBulkQuery(since: string | null): string {
  return `{
  customers${_filter(since)} {
    edges { node { id email phone firstName lastName createdAt updatedAt } }
  }
}`;
}

const _GID_PREFIX = "gid://shopify/";

/** The GID's type (`gid://shopify/LineItem/1` → `LineItem`), or null. */
export function gidType(gid: unknown): string | null {
  if (typeof gid !== "string" || !gid.startsWith(_GID_PREFIX)) return null;
  const end = _letters(gid, _GID_PREFIX.length);
  return end > _GID_PREFIX.length && gid.charCodeAt(end) === 47
    ? gid.slice(_GID_PREFIX.length, end)
    : null;
}

/**
 * The GID's number (`gid://shopify/Order/123` → `123`; up to 20 digits, then nothing or a `?`
 * query on one line), or undefined. Read with a scan, not a regular expression: it runs several
 * times per order of a backfill.
 */
export function gidNumber(gid: unknown): string | undefined {
  if (typeof gid !== "string" || !gid.startsWith(_GID_PREFIX)) return undefined;
  const slash = _letters(gid, _GID_PREFIX.length);
  if (slash === _GID_PREFIX.length || gid.charCodeAt(slash) !== 47) return undefined;
  const start = slash + 1;
  let end = start;
  while (end < gid.length && gid.charCodeAt(end) >= 48 && gid.charCodeAt(end) <= 57) end++;
  if (end === start || end - start > 20) return undefined;
  if (end < gid.length) {
    if (gid.charCodeAt(end) !== 63) return undefined;
    for (let i = end + 1; i < gid.length; i++) {
      const c = gid.charCodeAt(i);
      if (c === 10 || c === 13 || c === 0x2028 || c === 0x2029) return undefined;
    }
  }
  return gid.slice(start, end);
}

/** The index after the ASCII letters from `at`. */
function _letters(text: string, at: number): number {
  let i = at;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i) | 32;
    if (c < 97 || c > 122) break;
  }
  return i;
}

/**
 * An order object and its line item objects as an order line candidate: the import's schema
 * validates it, so a field Shopify left out or got wrong is reported, not guessed.
 */
export function mapBulkOrder(order: Payload, items: Payload[]): Record<string, unknown> {
  const customer = _object(order.customer);
  const total = _object(_object(order.totalPriceSet)?.shopMoney);
  const financial = typeof order.displayFinancialStatus === "string"
    ? order.displayFinancialStatus.toLowerCase()
    : null;
  const mappedCustomer: CustomerLine = {
    shopify_customer_id: gidNumber(customer?.id) ?? null,
    email: _text(customer?.email) ?? _text(order.email) ?? null,
    phone: _text(customer?.phone) ?? _text(order.phone) ?? null,
    first_name: _text(customer?.firstName) ?? null,
    last_name: _text(customer?.lastName) ?? null,
  };
  return {
    external_id: gidNumber(order.id),
    number: order.name,
    ...mapOrderStatus({ cancelled_at: order.cancelledAt, financial_status: financial }),
    total: shopifyMoney(total?.amount),
    currency_code: order.currencyCode ?? total?.currencyCode,
    created_at: order.createdAt,
    processed_at: order.processedAt ?? null,
    updated_at: order.updatedAt ?? null,
    customer: mappedCustomer.shopify_customer_id || mappedCustomer.email || mappedCustomer.phone
      ? mappedCustomer
      : null,
    line_items: items.map((item) => ({
      title: _text(item.title) ?? "",
      quantity: item.quantity,
      price: shopifyMoney(_object(_object(item.originalUnitPriceSet)?.shopMoney)?.amount),
      sku: _text(item.sku) ?? null,
      product_id: gidNumber(_object(item.product)?.id) ?? null,
      variant_id: gidNumber(_object(item.variant)?.id) ?? null,
      variant_title: _text(item.variantTitle) ?? null,
    })),
  };
}

/** A customer object as a customer line with its `updatedAt`; null without a usable id. */
export function mapBulkCustomer(
  customer: Payload,
): { customer: CustomerLine & { shopify_customer_id: string }; updatedAt: string | null } | null {
  const id = gidNumber(customer.id);
  if (!id) return null;
  return {
    customer: {
      shopify_customer_id: id,
      email: _text(customer.email) ?? null,
      phone: _text(customer.phone) ?? null,
      first_name: _text(customer.firstName) ?? null,
      last_name: _text(customer.lastName) ?? null,
    },
    updatedAt: typeof customer.updatedAt === "string" ? customer.updatedAt : null,
  };
}

function _text(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  const text = value.trim();
  return text === "" ? undefined : text;
}

function _object(value: unknown): Payload | null {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? value as Payload
    : null;
}
