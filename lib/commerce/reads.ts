/**
 * Commerce reads from the synced store: order and subscription pages and details, and the
 * customer filters that narrow them to one contact.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { countToWindow } from "../store/offset_window.ts";
import { normalizeEmail, normalizePhone } from "./contacts.ts";
import {
  type BILLING_STATUSES,
  money,
  ORDER_STATES,
  type SUBSCRIPTION_STATUSES,
} from "./order_lines.ts";
import type { StoredLineItem } from "./orders.ts";

type _State = (typeof ORDER_STATES)[number];
type _Billing = (typeof BILLING_STATUSES)[number];

/** An order in lists. */
export interface OrderSummary {
  id: string;
  external_id: string;
  number: string;
  state: _State;
  billing_status: _Billing;
  total: string;
  currency_code: string;
  customer: { contact_id: string | null; shopify_customer_id?: string };
  created_at: string;
  recovered_at: string | null;
}

/** A single order: the summary plus dates and line items. */
export interface OrderDetail extends OrderSummary {
  processed_at: string | null;
  updated_at: string | null;
  line_items: {
    title: string;
    quantity: number;
    price: string;
    sku: string;
    product_id: string;
    variant_id: string;
    variant_title: string;
  }[];
}

/** Filters of GET /cdp/commerce/orders. */
export interface OrderFilters {
  createdAtGte?: Date;
  createdAtLte?: Date;
  state?: string;
  billingStatus?: string;
  /** Restrict to one contact; null means "a customer filter matched nobody". */
  contactId?: string | null;
}

/**
 * Resolves the customer_* filters to one contact by precedence email, then storefront customer
 * id, then phone (E.164). Undefined when no customer filter is given; null when it matches none.
 */
export async function resolveCustomerFilter(
  sql: Sql,
  brandId: string,
  filter: { email?: string; customerId?: string; phone?: string },
): Promise<string | null | undefined> {
  if (filter.email !== undefined) {
    const email = normalizeEmail(filter.email);
    return email ? await _contact(sql, brandId, sql`email = ${email}`) : null;
  }
  if (filter.customerId !== undefined) {
    return await _contact(sql, brandId, sql`shopify_customer_id = ${filter.customerId}`);
  }
  if (filter.phone !== undefined) {
    const phone = normalizePhone(filter.phone);
    return phone ? await _contact(sql, brandId, sql`phone = ${phone}`) : null;
  }
  return undefined;
}

async function _contact(sql: Sql, brandId: string, match: ReturnType<Sql>): Promise<string | null> {
  const [row] = await sql<{ id: string }[]>`
    select id from contacts where brand_id = ${brandId} and ${match} order by created_at limit 1`;
  return row?.id ?? null;
}

interface _OrderRow {
  id: string;
  external_id: string;
  number: string;
  state: _State;
  billing_status: _Billing;
  total: string;
  currency_code: string;
  contact_id: string | null;
  shopify_customer_id: string | null;
  created_at: Date;
  recovered_at: Date | null;
  processed_at: Date | null;
  updated_at: Date | null;
}

/** A page of a brand's orders, newest first, with the total (counted up to the window + 1). */
export async function listOrders(
  sql: Sql,
  brandId: string,
  filters: OrderFilters,
  page: { limit: number; offset: number },
): Promise<{ list: OrderSummary[]; total: number }> {
  if (filters.contactId === null) return { list: [], total: 0 };
  const where = sql`
    o.brand_id = ${brandId}
    ${filters.createdAtGte ? sql`and o.created_at >= ${filters.createdAtGte}` : sql``}
    ${filters.createdAtLte ? sql`and o.created_at <= ${filters.createdAtLte}` : sql``}
    ${filters.billingStatus ? sql`and o.billing_status = ${filters.billingStatus}` : sql``}
    ${filters.contactId ? sql`and o.contact_id = ${filters.contactId}` : sql``}`;
  // One state at a time, each read in date order from the (brand, state, date) index up to the
  // page's end, then merged: the page of all states without a second date index on orders for
  // every import to maintain. Any order of the page is within the page's end of its own state.
  const states = filters.state ? [filters.state] : [...ORDER_STATES];
  const rows = await sql<_OrderRow[]>`
    select o.* from unnest(${states}::text[]) s(state)
    cross join lateral (
      select o.id, o.external_id, o.number, o.state, o.billing_status, o.total::text as total,
             o.currency_code, o.contact_id, null as shopify_customer_id, o.created_at,
             o.recovered_at, o.processed_at, o.updated_at
      from orders o where ${where} and o.state = s.state
      order by o.created_at desc, o.id
      limit ${page.offset + page.limit}
    ) o
    order by o.created_at desc, o.id
    limit ${page.limit} offset ${page.offset}`;
  const total = await countToWindow(
    sql,
    sql`select 1 from orders o where ${where} and o.state = any(${states}::text[])`,
  );
  return { list: rows.map(_summary), total };
}

/** One order of the brand by its storefront (external) id, or null. */
export async function getOrder(
  sql: Sql,
  brandId: string,
  externalId: string,
): Promise<OrderDetail | null> {
  const [row] = await sql<(_OrderRow & { line_items: StoredLineItem[] })[]>`
    select o.id, o.external_id, o.number, o.state, o.billing_status, o.total::text as total,
           o.currency_code, o.contact_id, c.shopify_customer_id, o.created_at, o.recovered_at,
           o.processed_at, o.updated_at, o.line_items
    from orders o left join contacts c on c.id = o.contact_id
    where o.brand_id = ${brandId} and o.external_id = ${externalId}`;
  if (!row) return null;
  const summary = _summary(row);
  return {
    ...summary,
    customer: {
      contact_id: row.contact_id,
      ...(row.shopify_customer_id ? { shopify_customer_id: row.shopify_customer_id } : {}),
    },
    processed_at: row.processed_at?.toISOString() ?? null,
    updated_at: row.updated_at?.toISOString() ?? null,
    line_items: row.line_items.map((item) => ({
      title: item.title,
      quantity: item.quantity,
      price: item.price,
      sku: item.sku ?? "",
      product_id: item.product_id ?? "",
      variant_id: item.variant_id ?? "",
      variant_title: item.variant_title ?? "",
    })),
  };
}

function _summary(row: _OrderRow): OrderSummary {
  return {
    id: row.id,
    external_id: row.external_id,
    number: row.number,
    state: row.state,
    billing_status: row.billing_status,
    total: money(row.total),
    currency_code: row.currency_code,
    customer: { contact_id: row.contact_id },
    created_at: row.created_at.toISOString(),
    recovered_at: row.recovered_at?.toISOString() ?? null,
  };
}

/** A subscription contract as the API shows it. */
export interface SubscriptionView {
  id: string;
  external_id: string;
  status: (typeof SUBSCRIPTION_STATUSES)[number];
  next_billing_date: string | null;
  customer: { contact_id: string | null };
  created_at: string;
  updated_at: string;
}

/** A page of a brand's subscription contracts, by external id. */
export async function listSubscriptions(
  sql: Sql,
  brandId: string,
  filters: { status?: string; contactId?: string | null },
  page: { limit: number; offset: number },
): Promise<{ list: SubscriptionView[]; total: number }> {
  if (filters.contactId === null) return { list: [], total: 0 };
  const where = sql`
    s.brand_id = ${brandId}
    ${filters.status ? sql`and s.status = ${filters.status}` : sql``}
    ${filters.contactId ? sql`and s.contact_id = ${filters.contactId}` : sql``}`;
  const rows = await sql<_SubscriptionRow[]>`
    select s.id, s.external_id, s.status, s.next_billing_date, s.contact_id, s.created_at, s.updated_at
    from subscriptions s where ${where}
    order by s.external_id limit ${page.limit} offset ${page.offset}`;
  const [count] = await sql<
    { n: number }[]
  >`select count(*)::int as n from subscriptions s where ${where}`;
  return { list: rows.map(_subscription), total: count!.n };
}

/** One subscription contract of the brand by its external id, or null. */
export async function getSubscription(
  sql: Sql,
  brandId: string,
  externalId: string,
): Promise<SubscriptionView | null> {
  const [row] = await sql<_SubscriptionRow[]>`
    select s.id, s.external_id, s.status, s.next_billing_date, s.contact_id, s.created_at, s.updated_at
    from subscriptions s where s.brand_id = ${brandId} and s.external_id = ${externalId}`;
  return row ? _subscription(row) : null;
}

interface _SubscriptionRow {
  id: string;
  external_id: string;
  status: (typeof SUBSCRIPTION_STATUSES)[number];
  next_billing_date: Date | null;
  contact_id: string | null;
  created_at: Date;
  updated_at: Date;
}

function _subscription(row: _SubscriptionRow): SubscriptionView {
  return {
    id: row.id,
    external_id: row.external_id,
    status: row.status,
    next_billing_date: row.next_billing_date?.toISOString() ?? null,
    customer: { contact_id: row.contact_id },
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
