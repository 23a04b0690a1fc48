/**
 * Order writes: order lines stored set-based, each replacing the order with the same external id
 * and its line items, writing nothing for what is already stored; the steps of `orders import`.
 *
 * The principal module of lib/commerce/, which owns a brand's synced commerce store in
 * PostgreSQL: the lines it accepts (order_lines.ts), their contacts (contacts.ts), order and
 * subscription writes (orders.ts, subscriptions.ts, over line_writes.ts), NDJSON imports
 * (import.ts), reads (reads.ts), the unified customer record (customers.ts), and insights
 * (insights.ts) served from materialized summaries (summaries.ts). It knows no HTTP and no
 * Shopify: lib/shopify/ maps Shopify's payloads to these lines.
 *
 * @module
 */
import { copyField, copyIn, jsonParam, type Sql, type Tx } from "../store/db.ts";
import type { ImportSteps } from "./import.ts";
import { lastPerExternalId, lineImport, type LineWriting, upsertLines } from "./line_writes.ts";
import { money, type OrderLine, OrderLineSchema, parseOrderLineFast } from "./order_lines.ts";
import { markInsightsChanged } from "./summaries.ts";

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
  customer_redacted_at: Date | null;
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
 * (`upsertContacts`) in the same transaction. Returns each line's order id.
 */
export function upsertOrders(
  tx: Tx,
  input: LineWriting & { lines: OrderLine[] },
): Promise<string[]> {
  return upsertLines(tx, input, writeOrders);
}

/**
 * The brand's stored orders with these external ids, as a query to await (or explain): one probe
 * of the (brand, external id) key per id, as for contacts (contacts.ts).
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
             contact_id, created_at, processed_at, updated_at, recovered_at,
             customer_redacted_at, line_items
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
 *
 * A stale line never wins: a line whose `updated_at` is older than the stored order's is not
 * written, checked again by the update itself against the row as committed, so a concurrent
 * writer (a webhook, a backfill) keeps the newer state whichever commits first. A line without
 * `recovered_at` keeps the stored one, and an order whose customer was redacted stays unlinked.
 */
export async function writeOrders(
  tx: Tx,
  input: LineWriting & { lines: OrderLine[]; contactIds: (string | null)[] },
): Promise<string[]> {
  const lines = lastPerExternalId(input.lines, input.contactIds);
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
    if (old && _older(line.updated_at, old.updated_at)) {
      idOf.set(line.external_id, old.id);
      continue;
    }
    const row = {
      id: old?.id ?? `ord_${input.newId()}`,
      external_id: line.external_id,
      number: line.number,
      state: line.state,
      billing_status: line.billing_status,
      total: line.total,
      currency_code: line.currency_code,
      contact_id: old?.customer_redacted_at ? null : line.contactId,
      created_at: line.created_at,
      processed_at: line.processed_at ?? null,
      updated_at: line.updated_at ?? null,
      recovered_at: line.recovered_at === undefined
        ? (old?.recovered_at?.toISOString() ?? null)
        : line.recovered_at,
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
      from jsonb_to_recordset(${jsonParam(tx, inserts)}::jsonb) as x(
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
      from jsonb_to_recordset(${jsonParam(tx, updates)}::jsonb) as x(
        id text, number text, state text, billing_status text, total numeric, currency_code text,
        contact_id text, created_at timestamptz, processed_at timestamptz,
        updated_at timestamptz, recovered_at timestamptz, line_items jsonb)
      where o.id = x.id
        and (o.updated_at is null or x.updated_at is null or o.updated_at <= x.updated_at)`;
  }
  if (inserts.length + updates.length > 0) {
    await markInsightsChanged(tx, input.brandId);
  }
  return input.lines.map((line) => idOf.get(line.external_id)!);
}

/** Whether an incoming `updated_at` is older than the stored one (either absent: no). */
function _older(incoming: string | null | undefined, stored: Date | null): boolean {
  return !!incoming && stored !== null && Date.parse(incoming) < stored.getTime();
}

/** An order row as `writeOrders` writes it: a stored order with its timestamps as given. */
type _OrderRow =
  & Omit<
    _StoredOrder,
    "created_at" | "processed_at" | "updated_at" | "recovered_at" | "customer_redacted_at"
  >
  & {
    created_at: string;
    processed_at: string | null;
    updated_at: string | null;
    recovered_at: string | null;
  };

/** Inserts new orders with one COPY. */
async function _copyOrders(tx: Tx, input: LineWriting, rows: _OrderRow[]): Promise<void> {
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
  input: LineWriting & { line: OrderLine },
): Promise<string> {
  return (await upsertOrders(tx, { ...input, lines: [input.line] }))[0]!;
}

/**
 * The steps of `orders import`: each batch's contacts first, committed in file order, then its
 * orders, keyed by external id.
 */
export function orderImport(input: LineWriting): ImportSteps<OrderLine, string | null> {
  return lineImport(input, {
    schema: OrderLineSchema,
    fastParse: parseOrderLineFast,
    write: writeOrders,
  });
}
