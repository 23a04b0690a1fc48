/**
 * Contacts: the people behind orders and subscriptions, matched by Shopify customer id, then
 * normalized email, then E.164 phone, and upserted set-based a batch at a time; an import's
 * memory of the contacts it already resolved.
 *
 * @module
 */
import { uuidV7 } from "../ids.ts";
import { jsonParam, type Tx } from "../store/db.ts";
import type { CustomerLine } from "./order_lines.ts";

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

interface _ContactRow {
  id: string;
  shopify_customer_id: string | null;
  email: string | null;
  phone: string | null;
  first_name: string | null;
  last_name: string | null;
  /** Set on a contact this call creates for a customer Shopify dated. */
  source_updated_at?: string | null;
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
    customers: (CustomerLine | null | undefined)[];
    now: Date;
    /**
     * Contacts already resolved by Shopify customer id (an import's earlier batches), read and
     * never changed: a customer found here is not looked up again.
     */
    known?: ReadonlyMap<string, _ContactRow>;
    /** Receives each contact with a Shopify customer id as this call leaves it. */
    learned?: Map<string, _ContactRow>;
    /** When Shopify last changed each customer: a contact created for one records it. */
    sourceUpdatedAt?: (string | null)[];
    /** Receives the ids of the contacts this call creates. */
    created?: Set<string>;
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
  const ids = wanted.map((w, i) => {
    if (w === null) return null;
    let row = (w.shopifyId ? byShopify.get(w.shopifyId) : undefined) ??
      (w.email ? byEmail.get(w.email) : undefined) ?? (w.phone ? byPhone.get(w.phone) : undefined);
    if (!row) {
      // A UUID, as the customer lookup classifies identifiers.
      row = {
        id: uuidV7(),
        shopify_customer_id: w.shopifyId,
        email: w.email,
        phone: w.phone,
        first_name: w.first,
        last_name: w.last,
        source_updated_at: input.sourceUpdatedAt?.[i] ?? null,
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
                            created_at, updated_at, source_updated_at)
      select x.id, ${input.brandId}, x.shopify_customer_id, x.email, x.phone, x.first_name,
             x.last_name, ${input.now}, ${input.now}, x.source_updated_at
      from jsonb_to_recordset(${jsonParam(tx, created)}::jsonb) as x(
        id text, shopify_customer_id text, email text, phone text, first_name text, last_name text,
        source_updated_at timestamptz)`;
    for (const row of created) input.created?.add(row.id);
  }
  // A contact created by this batch is inserted with its final fields.
  const updates = [...changed].filter((row) => !createdIds.has(row.id));
  if (updates.length > 0) {
    await tx`
      update contacts c set shopify_customer_id = x.shopify_customer_id, email = x.email,
             phone = x.phone, first_name = x.first_name, last_name = x.last_name,
             updated_at = ${input.now}
      from jsonb_to_recordset(${jsonParam(tx, updates)}::jsonb) as x(
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
  input: { brandId: string; customer: CustomerLine; now: Date },
): Promise<string | null> {
  return (await upsertContacts(tx, { ...input, customers: [input.customer] }))[0]!;
}

/** Contacts an import remembers by Shopify customer id: enough for a large store's customers. */
const _MEMORY = 200_000;

/**
 * Resolves an import's contacts batch by batch ({@linkcode upsertContacts}), remembering those
 * of committed batches, so a customer named again by a later batch costs no lookup.
 */
export function contactMemory(input: { brandId: string; now: Date }) {
  const known = new Map<string, _ContactRow>();
  let learned = new Map<string, _ContactRow>();
  return {
    resolve(tx: Tx, lines: { customer?: CustomerLine | null }[]): Promise<(string | null)[]> {
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

/** The advisory lock key that serializes writers of one Shopify customer's contact. */
export function contactLockKey(brandId: string, shopifyCustomerId: string): string {
  return `contact|${brandId}|${shopifyCustomerId}`;
}

/** A Shopify customer with the time Shopify last changed it (`updatedAt`). */
export interface SourcedCustomer {
  customer: CustomerLine & { shopify_customer_id: string };
  updatedAt: string | null;
}

/**
 * Upserts Shopify customers set-based ({@linkcode upsertContacts}), each with the time Shopify
 * last changed it, which the contact records (`source_updated_at`). A customer older than what
 * its contact last took from Shopify is stale and skipped. It takes the locks a customer webhook
 * takes ({@linkcode contactLockKey}, in key order), so a webhook and a batch keep the newer state
 * whichever commits first. When a batch names a customer twice, the newer wins. Returns how many
 * were written.
 */
export async function upsertSourcedCustomers(
  tx: Tx,
  input: { brandId: string; customers: SourcedCustomer[]; now: Date },
): Promise<number> {
  const time = (value: string | null) => value === null ? -Infinity : Date.parse(value);
  const newest = new Map<string, SourcedCustomer>();
  for (const entry of input.customers) {
    const id = entry.customer.shopify_customer_id;
    const seen = newest.get(id);
    if (!seen || time(entry.updatedAt) >= time(seen.updatedAt)) newest.set(id, entry);
  }
  if (newest.size === 0) return 0;
  const ids = [...newest.keys()].sort();
  await tx`
    select pg_advisory_xact_lock(hashtextextended(k, 0))
    from unnest(${ids.map((id) => contactLockKey(input.brandId, id))}::text[]) k`;
  const stored = await tx<{ shopify_customer_id: string; source_updated_at: Date | null }[]>`
    select c.* from unnest(${ids}::text[]) v(x)
    cross join lateral (
      select shopify_customer_id, source_updated_at from contacts
      where brand_id = ${input.brandId} and shopify_customer_id = v.x offset 0
    ) c`;
  const storedAt = new Map(stored.map((row) => [row.shopify_customer_id, row.source_updated_at]));
  const fresh = [...newest.values()].filter((entry) => {
    const at = storedAt.get(entry.customer.shopify_customer_id);
    return !(at && entry.updatedAt && Date.parse(entry.updatedAt) < at.getTime());
  });
  if (fresh.length === 0) return 0;
  const created = new Set<string>();
  const contactIds = await upsertContacts(tx, {
    brandId: input.brandId,
    customers: fresh.map((entry) => entry.customer),
    now: input.now,
    sourceUpdatedAt: fresh.map((entry) => entry.updatedAt),
    created,
  });
  // New contacts got the time on insert: an update statement costs the contacts' statement
  // trigger a join of its transition tables, which grows with the square of the rows updated.
  const dated = fresh.flatMap((entry, i) => {
    const id = contactIds[i];
    return entry.updatedAt && id && !created.has(id) ? [{ id, at: entry.updatedAt }] : [];
  });
  if (dated.length > 0) {
    await tx`
      update contacts c set source_updated_at = x.at
      from jsonb_to_recordset(${jsonParam(tx, dated)}::jsonb) as x(id text, at timestamptz)
      where c.id = x.id and (c.source_updated_at is null or c.source_updated_at < x.at)`;
  }
  return fresh.length;
}
