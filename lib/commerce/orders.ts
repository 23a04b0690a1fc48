import { z } from "zod";
import type { Tx } from "../db.ts";

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

const _money = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const text = typeof value === "number" ? String(value) : value.trim();
  if (!/^-?\d{1,15}(\.\d{1,2})?$/.test(text)) {
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
  currency_code: z.string().regex(/^[A-Z]{3}$/, "must be an ISO 4217 code"),
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

/**
 * Upserts a contact: matched by Shopify customer id, then normalized email, then E.164 phone;
 * fields it lacked are filled in. Null when the customer carries no usable identifier.
 */
export async function upsertContact(
  tx: Tx,
  input: { brandId: string; customer: _Customer; newId: () => string; now: Date },
): Promise<string | null> {
  const shopifyId = input.customer.shopify_customer_id ?? null;
  const email = normalizeEmail(input.customer.email);
  const phone = normalizePhone(input.customer.phone);
  if (!shopifyId && !email && !phone) return null;
  const [found] = await tx<{ id: string }[]>`
    select id from contacts
    where brand_id = ${input.brandId}
      and ((${shopifyId}::text is not null and shopify_customer_id = ${shopifyId})
        or (${email}::text is not null and email = ${email})
        or (${phone}::text is not null and phone = ${phone}))
    order by (shopify_customer_id = ${shopifyId}) desc nulls last,
             (email = ${email}) desc nulls last, created_at
    limit 1`;
  const first = input.customer.first_name ?? null;
  const last = input.customer.last_name ?? null;
  if (found) {
    await tx`
      update contacts set
        shopify_customer_id = coalesce(shopify_customer_id, ${shopifyId}),
        email = coalesce(${email}, email),
        phone = coalesce(${phone}, phone),
        first_name = coalesce(${first}, first_name),
        last_name = coalesce(${last}, last_name),
        updated_at = ${input.now}
      where id = ${found.id}`;
    return found.id;
  }
  // A UUID, as the customer lookup classifies identifiers (spec 4.11).
  const id = crypto.randomUUID();
  await tx`
    insert into contacts (id, brand_id, shopify_customer_id, email, phone, first_name, last_name,
                          created_at, updated_at)
    values (${id}, ${input.brandId}, ${shopifyId}, ${email}, ${phone}, ${first}, ${last},
            ${input.now}, ${input.now})`;
  return id;
}

/** Stores an order line, replacing the order with the same external id (idempotent). */
export async function upsertOrder(
  tx: Tx,
  input: { brandId: string; line: OrderLine; newId: () => string; now: Date },
): Promise<string> {
  const { line } = input;
  const contactId = line.customer
    ? await upsertContact(tx, { ...input, customer: line.customer })
    : null;
  const [order] = await tx<{ id: string }[]>`
    insert into orders (id, brand_id, external_id, number, state, billing_status, total,
                        currency_code, contact_id, created_at, processed_at, updated_at,
                        recovered_at, synced_at)
    values (${`ord_${input.newId()}`}, ${input.brandId}, ${line.external_id}, ${line.number},
            ${line.state}, ${line.billing_status}, ${line.total}::numeric, ${line.currency_code},
            ${contactId}, ${line.created_at}, ${line.processed_at ?? null}, ${
    line.updated_at ?? null
  },
            ${line.recovered_at ?? null}, ${input.now})
    on conflict (brand_id, external_id) do update set
      number = excluded.number, state = excluded.state, billing_status = excluded.billing_status,
      total = excluded.total, currency_code = excluded.currency_code,
      contact_id = excluded.contact_id, created_at = excluded.created_at,
      processed_at = excluded.processed_at, updated_at = excluded.updated_at,
      recovered_at = excluded.recovered_at, synced_at = excluded.synced_at
    returning id`;
  await tx`delete from order_line_items where order_id = ${order!.id}`;
  if (line.line_items.length > 0) {
    const items = line.line_items.map((item, position) => ({
      order_id: order!.id,
      position,
      title: item.title,
      quantity: item.quantity,
      price: item.price,
      sku: item.sku ?? null,
      product_id: item.product_id ?? null,
      variant_id: item.variant_id ?? null,
      variant_title: item.variant_title ?? null,
    }));
    await tx`
      insert into order_line_items (order_id, position, title, quantity, price, sku, product_id,
                                    variant_id, variant_title)
      select x.order_id, x.position, x.title, x.quantity, x.price::numeric, x.sku, x.product_id,
             x.variant_id, x.variant_title
      from jsonb_to_recordset(${tx.json(items as never)}::jsonb) as x(
        order_id text, position integer, title text, quantity integer, price text, sku text,
        product_id text, variant_id text, variant_title text)`;
  }
  return order!.id;
}

/** Stores a subscription line, replacing the contract with the same external id. */
export async function upsertSubscription(
  tx: Tx,
  input: { brandId: string; line: SubscriptionLine; newId: () => string; now: Date },
): Promise<string> {
  const { line } = input;
  const contactId = line.customer
    ? await upsertContact(tx, { ...input, customer: line.customer })
    : null;
  const [row] = await tx<{ id: string }[]>`
    insert into subscriptions (id, brand_id, external_id, status, next_billing_date, contact_id,
                               created_at, updated_at)
    values (${`sub_${input.newId()}`}, ${input.brandId}, ${line.external_id}, ${line.status},
            ${line.next_billing_date ?? null}, ${contactId}, ${input.now}, ${input.now})
    on conflict (brand_id, external_id) do update set
      status = excluded.status, next_billing_date = excluded.next_billing_date,
      contact_id = excluded.contact_id, updated_at = excluded.updated_at
    returning id`;
  return row!.id;
}

/** Renders an exact numeric amount as a 2-decimal string. */
export function money(value: string | number): string {
  const [whole, fraction = ""] = String(value).split(".");
  return `${whole}.${fraction.padEnd(2, "0").slice(0, 2)}`;
}
