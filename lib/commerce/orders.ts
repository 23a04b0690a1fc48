import { z } from "zod";
import { uuidV7 } from "../ids.ts";
import { copyField, copyIn, type Sql, type Tx } from "../db.ts";
import type { ImportSteps } from "./import.ts";
import { markInsightsChanged } from "./summaries.ts";

/** Order states and billing statuses (spec section 3). */
export const ORDER_STATES = ["pending", "draft", "complete", "delivered", "cancelled"] as const;
export const BILLING_STATUSES = ["billable", "processing", "complete", "on_hold"] as const;
/** Subscription contract statuses (design.md section 6). */
export const SUBSCRIPTION_STATUSES = [
  "active",
  "paused",
  "cancelled",
  "expired",
  "failed",
] as const;

/** A normalized email: trimmed and lower-cased; null when it is not an address. */
export function normalizeEmail(input: string | null | undefined): string | null {
  const email = input?.trim().toLowerCase();
  return email && /^[^\s@]+@[^\s@]+$/.test(email) ? email : null;
}

/**
 * A phone number in E.164 (`+` and 8 to 15 digits), from `+1 613 555 1111`, `+1-613-555-1111`,
 * `(+1) 613.555.1111` or `0016135551111`. Without a country prefix the number is ambiguous, so
 * it is null rather than guessed.
 */
export function normalizePhone(input: string | null | undefined): string | null {
  const trimmed = input?.trim();
  if (!trimmed) return null;
  const international = trimmed.replace(/^\(\+(\d+)\)/, "+$1").replace(/^00/, "+");
  if (!international.startsWith("+") || /[^\d\s().+-]/.test(international.slice(1))) return null;
  const digits = international.slice(1).replace(/[\s().-]/g, "");
  return /^[1-9]\d{7,14}$/.test(digits) ? `+${digits}` : null;
}

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

/** The customer part of an import line (design.md section 6). */
export const CustomerSchema = z.object({
  shopify_customer_id: _id.optional().nullable(),
  email: z.string().max(320).optional().nullable(),
  phone: z.string().max(40).optional().nullable(),
  first_name: z.string().max(200).optional().nullable(),
  last_name: z.string().max(200).optional().nullable(),
});

/** One order line of `orders import` (design.md section 6). */
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
 * (tests/lib/commerce/orders_test.ts compares the two over many valid and broken lines).
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

function _fastCustomer(value: unknown): _Customer | undefined {
  if (!_isRecord(value)) return undefined;
  const customer: _Customer = {};
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
type _Customer = z.infer<typeof CustomerSchema>;

interface _ContactRow {
  id: string;
  shopify_customer_id: string | null;
  email: string | null;
  phone: string | null;
  first_name: string | null;
  last_name: string | null;
}

interface _Wanted {
  shopifyId: string | null;
  email: string | null;
  phone: string | null;
  first: string | null;
  last: string | null;
}

/**
 * The brand's contacts whose `column` is one of `values`: one index probe per value, whatever
 * the planner's statistics say (a young brand's would have it scan every contact of the brand).
 */
function _probeContacts(
  tx: Tx,
  brandId: string,
  column: "shopify_customer_id" | "email" | "phone",
  values: Set<string>,
): Promise<(_ContactRow & { created_at: Date })[]> {
  // `offset 0` keeps the subquery a per-value probe rather than a join the planner may hash.
  return tx<(_ContactRow & { created_at: Date })[]>`
    select c.* from unnest(${[...values]}::text[]) v(x)
    cross join lateral (
      select id, shopify_customer_id, email, phone, first_name, last_name, created_at
      from contacts where brand_id = ${brandId} and ${tx(column)} = v.x offset 0
    ) c`;
}

/**
 * Upserts the contacts of many customers at once (a handful of statements whatever their number)
 * and returns each one's contact id, null for a customer without a usable identifier. A customer
 * matches an existing contact by Shopify customer id, then normalized email, then E.164 phone
 * (the oldest contact first); a match gets the Shopify id it lacked, the newer email, phone and
 * names. Customers of one batch naming the same new person share one new contact.
 */
export async function upsertContacts(
  tx: Tx,
  input: {
    brandId: string;
    customers: (_Customer | null | undefined)[];
    now: Date;
    /**
     * Contacts already resolved by Shopify customer id (an import's earlier batches), read and
     * never changed: a customer found here is not looked up again.
     */
    known?: ReadonlyMap<string, _ContactRow>;
    /** Receives each contact with a Shopify customer id as this call leaves it. */
    learned?: Map<string, _ContactRow>;
  },
): Promise<(string | null)[]> {
  const wanted: (_Wanted | null)[] = [];
  const shopifyIds = new Set<string>();
  for (const c of input.customers) {
    const w = c
      ? {
        shopifyId: c.shopify_customer_id ?? null,
        email: normalizeEmail(c.email),
        phone: normalizePhone(c.phone),
        first: c.first_name ?? null,
        last: c.last_name ?? null,
      }
      : null;
    const usable = w !== null && (w.shopifyId !== null || w.email !== null || w.phone !== null);
    wanted.push(usable ? w : null);
    if (usable && w.shopifyId !== null && !input.known?.has(w.shopifyId)) {
      shopifyIds.add(w.shopifyId);
    }
  }
  if (wanted.every((w) => w === null)) return wanted.map(() => null);
  // Most customers of an import are known by their Shopify id: probe those first, then email
  // and phone only for the customers that found no contact that way.
  const shopifyRows = shopifyIds.size > 0
    ? await _probeContacts(tx, input.brandId, "shopify_customer_id", shopifyIds)
    : [];
  const byShopify = new Map<string, _ContactRow>(
    shopifyRows.map((row) => [row.shopify_customer_id!, row]),
  );
  if (input.known) {
    for (const w of wanted) {
      const row = w?.shopifyId ? input.known.get(w.shopifyId) : undefined;
      // A copy: this batch may change it, and its transaction may yet fail.
      if (row && !byShopify.has(w!.shopifyId!)) byShopify.set(w!.shopifyId!, { ...row });
    }
  }
  const emails = new Set<string>();
  const phones = new Set<string>();
  for (const w of wanted) {
    if (w === null || (w.shopifyId !== null && byShopify.has(w.shopifyId))) continue;
    if (w.email !== null) emails.add(w.email);
    if (w.phone !== null) phones.add(w.phone);
  }
  const byEmail = new Map<string, _ContactRow>();
  const byPhone = new Map<string, _ContactRow>();
  const index = (row: _ContactRow) => {
    if (row.shopify_customer_id && !byShopify.has(row.shopify_customer_id)) {
      byShopify.set(row.shopify_customer_id, row);
    }
    if (row.email && !byEmail.has(row.email)) byEmail.set(row.email, row);
    if (row.phone && !byPhone.has(row.phone)) byPhone.set(row.phone, row);
  };
  // When every customer matched by Shopify id, nobody looks up an email or a phone (the common
  // case of an import after its first batches): those indexes are only built when needed.
  if (emails.size > 0 || phones.size > 0) {
    const found = new Map(shopifyRows.map((row) => [row.id, row]));
    // Both at once: the transaction's connection sends them one behind the other.
    const [emailRows, phoneRows] = await Promise.all([
      emails.size > 0 ? _probeContacts(tx, input.brandId, "email", emails) : [],
      phones.size > 0 ? _probeContacts(tx, input.brandId, "phone", phones) : [],
    ]);
    for (const row of [...emailRows, ...phoneRows]) found.set(row.id, row);
    [...found.values()].sort((a, b) =>
      a.created_at.getTime() - b.created_at.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
    ).forEach(index);
  }
  const created: _ContactRow[] = [];
  const changed = new Set<_ContactRow>();
  const ids = wanted.map((w) => {
    if (w === null) return null;
    let row = (w.shopifyId ? byShopify.get(w.shopifyId) : undefined) ??
      (w.email ? byEmail.get(w.email) : undefined) ?? (w.phone ? byPhone.get(w.phone) : undefined);
    if (!row) {
      // A UUID, as the customer lookup classifies identifiers (spec 4.11).
      row = {
        id: uuidV7(),
        shopify_customer_id: w.shopifyId,
        email: w.email,
        phone: w.phone,
        first_name: w.first,
        last_name: w.last,
      };
      created.push(row);
      index(row);
    } else {
      const shopifyId = row.shopify_customer_id ?? w.shopifyId;
      const email = w.email ?? row.email;
      const phone = w.phone ?? row.phone;
      const first = w.first ?? row.first_name;
      const last = w.last ?? row.last_name;
      if (
        shopifyId !== row.shopify_customer_id || email !== row.email || phone !== row.phone ||
        first !== row.first_name || last !== row.last_name
      ) {
        row.shopify_customer_id = shopifyId;
        row.email = email;
        row.phone = phone;
        row.first_name = first;
        row.last_name = last;
        changed.add(row);
        index(row);
      }
    }
    return row.id;
  });
  const createdIds = new Set(created.map((row) => row.id));
  if (created.length > 0) {
    await tx`
      insert into contacts (id, brand_id, shopify_customer_id, email, phone, first_name, last_name,
                            created_at, updated_at)
      select x.id, ${input.brandId}, x.shopify_customer_id, x.email, x.phone, x.first_name,
             x.last_name, ${input.now}, ${input.now}
      from jsonb_to_recordset(${tx.json(created as never)}::jsonb) as x(
        id text, shopify_customer_id text, email text, phone text, first_name text, last_name text)`;
  }
  // A contact created by this batch is inserted with its final fields.
  const updates = [...changed].filter((row) => !createdIds.has(row.id));
  if (updates.length > 0) {
    await tx`
      update contacts c set shopify_customer_id = x.shopify_customer_id, email = x.email,
             phone = x.phone, first_name = x.first_name, last_name = x.last_name,
             updated_at = ${input.now}
      from jsonb_to_recordset(${tx.json(updates as never)}::jsonb) as x(
        id text, shopify_customer_id text, email text, phone text, first_name text, last_name text)
      where c.id = x.id`;
  }
  if (input.learned) {
    for (const [shopifyId, row] of byShopify) {
      input.learned.set(shopifyId, row);
    }
  }
  return ids;
}

/** Upserts one customer's contact; see {@linkcode upsertContacts}. */
export async function upsertContact(
  tx: Tx,
  input: { brandId: string; customer: _Customer; now: Date },
): Promise<string | null> {
  return (await upsertContacts(tx, { ...input, customers: [input.customer] }))[0]!;
}

/** Where a batch of lines is written: the brand, the id source and the clock. */
interface _Writing {
  brandId: string;
  newId: () => string;
  now: Date;
  /**
   * Insert a batch's new orders with COPY (a PostgreSQL server; embedded PGlite's socket has no
   * COPY): about a third less of the server's time per order than the statement (README: "The
   * synced store and imports").
   */
  copy?: boolean;
}

/** The last line of each external id with its contact: a batch may name one order twice. */
function _lastPerExternalId<T extends { external_id: string }>(
  lines: T[],
  contactIds: (string | null)[],
): (T & { contactId: string | null })[] {
  return [
    ...new Map(
      lines.map((line, i) => [line.external_id, { ...line, contactId: contactIds[i] ?? null }]),
    ).values(),
  ];
}

/** A line item as stored on its order: every field present, the price as exact 2-decimal text. */
export interface StoredLineItem {
  title: string;
  quantity: number;
  price: string;
  sku: string | null;
  product_id: string | null;
  variant_id: string | null;
  variant_title: string | null;
}

interface _StoredOrder {
  id: string;
  external_id: string;
  number: string;
  state: string;
  billing_status: string;
  total: string;
  currency_code: string;
  contact_id: string | null;
  created_at: Date;
  processed_at: Date | null;
  updated_at: Date | null;
  recovered_at: Date | null;
  line_items: StoredLineItem[];
}

/** The comparable form of an order's header, stored or incoming. */
function _orderKey(o: {
  number: string;
  state: string;
  billing_status: string;
  total: string;
  currency_code: string;
  contact_id: string | null;
  created_at: Date | string;
  processed_at: Date | string | null;
  updated_at: Date | string | null;
  recovered_at: Date | string | null;
}): string {
  const time = (value: Date | string | null) =>
    value === null ? null : value instanceof Date ? value.getTime() : Date.parse(value);
  return JSON.stringify([
    o.number,
    o.state,
    o.billing_status,
    money(o.total),
    o.currency_code,
    o.contact_id,
    time(o.created_at),
    time(o.processed_at),
    time(o.updated_at),
    time(o.recovered_at),
  ]);
}

/** A line's items in their stored form. */
function _storedItems(items: OrderLine["line_items"]): StoredLineItem[] {
  return items.map((item) => ({
    title: item.title,
    quantity: item.quantity,
    price: money(item.price),
    sku: item.sku ?? null,
    product_id: item.product_id ?? null,
    variant_id: item.variant_id ?? null,
    variant_title: item.variant_title ?? null,
  }));
}

/** Whether two lists of stored items are the same, in the same order. */
function _sameItems(a: StoredLineItem[], b: StoredLineItem[]): boolean {
  return a.length === b.length && a.every((item, i) => {
    const other = b[i]!;
    return item.title === other.title && item.quantity === other.quantity &&
      item.price === other.price && item.sku === other.sku &&
      item.product_id === other.product_id && item.variant_id === other.variant_id &&
      item.variant_title === other.variant_title;
  });
}

/**
 * Stores order lines set-based (a handful of statements per batch), each replacing the order
 * with the same external id and its line items (idempotent), with their customers' contacts
 * ({@linkcode upsertContacts}) in the same transaction. Returns each line's order id.
 */
export async function upsertOrders(
  tx: Tx,
  input: _Writing & { lines: OrderLine[] },
): Promise<string[]> {
  const contactIds = await upsertContacts(tx, {
    brandId: input.brandId,
    customers: input.lines.map((line) => line.customer),
    now: input.now,
  });
  return await writeOrders(tx, { ...input, contactIds });
}

/**
 * The brand's stored orders with these external ids, as a query to await (or explain): one probe
 * of the (brand, external id) key per id, as for contacts (see `_probeContacts`).
 */
export function storedOrdersQuery(tx: Sql | Tx, brandId: string, externalIds: string[]) {
  // The brand is given by a subquery, a value the planner does not see, so the probe is planned
  // for any brand and uses the (brand, external id) key. Planned for the brand itself, one the
  // statistics think empty (any brand new since the last ANALYZE, such as one being imported),
  // it may instead read all of that brand's orders for each id.
  return tx<_StoredOrder[]>`
    select o.* from unnest(${externalIds}::text[]) v(x)
    cross join lateral (
      select id, external_id, number, state, billing_status, total::text as total, currency_code,
             contact_id, created_at, processed_at, updated_at, recovered_at, line_items
      from orders where brand_id = (select ${brandId}::text) and external_id = v.x offset 0
    ) o`;
}

/**
 * Stores order lines whose contacts are already resolved (`contactIds`, one per line).
 * Existing orders are read first and compared: new ones are inserted and changed ones (header or
 * line items) updated, so re-importing what is already stored writes nothing (and leaves the
 * insight summaries current). When a batch names one order twice, its last line wins. An order
 * created meanwhile by someone else fails the batch on the unique key; the import retries line by
 * line.
 */
export async function writeOrders(
  tx: Tx,
  input: _Writing & { lines: OrderLine[]; contactIds: (string | null)[] },
): Promise<string[]> {
  const lines = _lastPerExternalId(input.lines, input.contactIds);
  const stored = await storedOrdersQuery(
    tx,
    input.brandId,
    lines.map((line) => line.external_id),
  );
  const storedBy = new Map(stored.map((row) => [row.external_id, row]));
  const idOf = new Map<string, string>();
  const inserts: _OrderRow[] = [];
  const updates: _OrderRow[] = [];
  for (const line of lines) {
    const old = storedBy.get(line.external_id);
    const row = {
      id: old?.id ?? `ord_${input.newId()}`,
      external_id: line.external_id,
      number: line.number,
      state: line.state,
      billing_status: line.billing_status,
      total: line.total,
      currency_code: line.currency_code,
      contact_id: line.contactId,
      created_at: line.created_at,
      processed_at: line.processed_at ?? null,
      updated_at: line.updated_at ?? null,
      recovered_at: line.recovered_at ?? null,
      line_items: _storedItems(line.line_items),
    };
    idOf.set(line.external_id, row.id);
    if (!old) inserts.push(row);
    else if (_orderKey(old) !== _orderKey(row) || !_sameItems(old.line_items, row.line_items)) {
      updates.push(row);
    }
  }
  // One order (a webhook, or a batch retried line by line) goes through the statement, whose
  // error names the cause; a refused COPY only says that the transaction is aborted.
  if (input.copy && inserts.length > 1) {
    await _copyOrders(tx, input, inserts);
  } else if (inserts.length > 0) {
    await tx`
      insert into orders (id, brand_id, external_id, number, state, billing_status, total,
                          currency_code, contact_id, created_at, processed_at, updated_at,
                          recovered_at, synced_at, line_items)
      select x.id, ${input.brandId}, x.external_id, x.number, x.state, x.billing_status, x.total,
             x.currency_code, x.contact_id, x.created_at, x.processed_at, x.updated_at,
             x.recovered_at, ${input.now}, x.line_items
      from jsonb_to_recordset(${tx.json(inserts as never)}::jsonb) as x(
        id text, external_id text, number text, state text, billing_status text, total numeric,
        currency_code text, contact_id text, created_at timestamptz, processed_at timestamptz,
        updated_at timestamptz, recovered_at timestamptz, line_items jsonb)`;
  }
  if (updates.length > 0) {
    await tx`
      update orders o set
        number = x.number, state = x.state, billing_status = x.billing_status, total = x.total,
        currency_code = x.currency_code, contact_id = x.contact_id, created_at = x.created_at,
        processed_at = x.processed_at, updated_at = x.updated_at, recovered_at = x.recovered_at,
        line_items = x.line_items, synced_at = ${input.now}
      from jsonb_to_recordset(${tx.json(updates as never)}::jsonb) as x(
        id text, number text, state text, billing_status text, total numeric, currency_code text,
        contact_id text, created_at timestamptz, processed_at timestamptz,
        updated_at timestamptz, recovered_at timestamptz, line_items jsonb)
      where o.id = x.id`;
  }
  if (inserts.length + updates.length > 0) {
    await markInsightsChanged(tx, input.brandId);
  }
  return input.lines.map((line) => idOf.get(line.external_id)!);
}

/** An order row as `writeOrders` writes it: a stored order with its timestamps as given. */
type _OrderRow =
  & Omit<_StoredOrder, "created_at" | "processed_at" | "updated_at" | "recovered_at">
  & {
    created_at: string;
    processed_at: string | null;
    updated_at: string | null;
    recovered_at: string | null;
  };

/** Inserts new orders with one COPY. */
async function _copyOrders(tx: Tx, input: _Writing, rows: _OrderRow[]): Promise<void> {
  const brand = copyField(input.brandId);
  const synced = input.now.toISOString();
  let text = "";
  for (const row of rows) {
    // State, billing status, total, currency and timestamps were validated to shapes that hold
    // no character COPY treats specially.
    text += `${copyField(row.id)}\t${brand}\t${copyField(row.external_id)}\t${
      copyField(row.number)
    }\t${row.state}\t${row.billing_status}\t${row.total}\t${row.currency_code}\t${
      copyField(row.contact_id)
    }\t${row.created_at}\t${copyField(row.processed_at)}\t${copyField(row.updated_at)}\t${
      copyField(row.recovered_at)
    }\t${synced}\t${copyField(JSON.stringify(row.line_items))}\n`;
  }
  await copyIn(
    tx,
    tx`
      copy orders (id, brand_id, external_id, number, state, billing_status, total, currency_code,
                   contact_id, created_at, processed_at, updated_at, recovered_at, synced_at,
                   line_items)
      from stdin`,
    text,
  );
}

/** Stores one order line; see {@linkcode upsertOrders}. */
export async function upsertOrder(
  tx: Tx,
  input: _Writing & { line: OrderLine },
): Promise<string> {
  return (await upsertOrders(tx, { ...input, lines: [input.line] }))[0]!;
}

/** Stores subscription lines set-based, each replacing the contract with the same external id. */
export async function upsertSubscriptions(
  tx: Tx,
  input: _Writing & { lines: SubscriptionLine[] },
): Promise<string[]> {
  const contactIds = await upsertContacts(tx, {
    brandId: input.brandId,
    customers: input.lines.map((line) => line.customer),
    now: input.now,
  });
  return await writeSubscriptions(tx, { ...input, contactIds });
}

/** Stores subscription lines whose contacts are already resolved (`contactIds`, one per line). */
export async function writeSubscriptions(
  tx: Tx,
  input: _Writing & { lines: SubscriptionLine[]; contactIds: (string | null)[] },
): Promise<string[]> {
  const lines = _lastPerExternalId(input.lines, input.contactIds);
  const rows = lines.map((line) => ({
    id: `sub_${input.newId()}`,
    external_id: line.external_id,
    status: line.status,
    next_billing_date: line.next_billing_date ?? null,
    contact_id: line.contactId,
  }));
  const stored = await tx<{ id: string; external_id: string }[]>`
    insert into subscriptions (id, brand_id, external_id, status, next_billing_date, contact_id,
                               created_at, updated_at)
    select x.id, ${input.brandId}, x.external_id, x.status, x.next_billing_date, x.contact_id,
           ${input.now}, ${input.now}
    from jsonb_to_recordset(${tx.json(rows as never)}::jsonb) as x(
      id text, external_id text, status text, next_billing_date timestamptz, contact_id text)
    on conflict (brand_id, external_id) do update set
      status = excluded.status, next_billing_date = excluded.next_billing_date,
      contact_id = excluded.contact_id, updated_at = excluded.updated_at
    returning id, external_id`;
  const idOf = new Map(stored.map((row) => [row.external_id, row.id]));
  return input.lines.map((line) => idOf.get(line.external_id)!);
}

/** Stores one subscription line; see {@linkcode upsertSubscriptions}. */
export async function upsertSubscription(
  tx: Tx,
  input: _Writing & { line: SubscriptionLine },
): Promise<string> {
  return (await upsertSubscriptions(tx, { ...input, lines: [input.line] }))[0]!;
}

/**
 * The steps of `orders import`: each batch's contacts first, committed in file order, then its
 * orders, keyed by external id.
 */
export function orderImport(
  input: _Writing,
): ImportSteps<OrderLine, string | null> {
  const contacts = _contactMemory(input);
  return {
    schema: OrderLineSchema,
    fastParse: parseOrderLineFast,
    prepare: contacts.resolve,
    prepared: contacts.commit,
    write: (tx, lines, contactIds) => writeOrders(tx, { ...input, lines, contactIds }),
    keyOf: (line) => line.external_id,
  };
}

/** The steps of `subscriptions import`, as {@linkcode orderImport}'s. */
export function subscriptionImport(
  input: _Writing,
): ImportSteps<SubscriptionLine, string | null> {
  const contacts = _contactMemory(input);
  return {
    schema: SubscriptionLineSchema,
    prepare: contacts.resolve,
    prepared: contacts.commit,
    write: (tx, lines, contactIds) => writeSubscriptions(tx, { ...input, lines, contactIds }),
    keyOf: (line) => line.external_id,
  };
}

/** Contacts an import remembers by Shopify customer id: enough for a large store's customers. */
const _MEMORY = 200_000;

/**
 * Resolves an import's contacts batch by batch ({@linkcode upsertContacts}), remembering those
 * of committed batches, so a customer named again by a later batch costs no lookup.
 */
function _contactMemory(input: { brandId: string; now: Date }) {
  const known = new Map<string, _ContactRow>();
  let learned = new Map<string, _ContactRow>();
  return {
    resolve(tx: Tx, lines: { customer?: _Customer | null }[]): Promise<(string | null)[]> {
      learned = new Map();
      return upsertContacts(tx, {
        ...input,
        customers: lines.map((line) => line.customer),
        known,
        learned,
      });
    },
    /** Called once the batch last resolved is committed. */
    commit(): void {
      for (const [shopifyId, row] of learned) {
        if (known.size < _MEMORY || known.has(shopifyId)) known.set(shopifyId, row);
      }
      learned = new Map();
    },
  };
}

/** Renders an exact numeric amount as a 2-decimal string. */
export function money(value: string | number): string {
  const [whole, fraction = ""] = String(value).split(".");
  return `${whole}.${fraction.padEnd(2, "0").slice(0, 2)}`;
}
