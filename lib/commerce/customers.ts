/**
 * Customers: resolving an identifier to a profile and a commerce contact, and the unified
 * customer record built from both.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { type ReadBudget, segmentsOfProfiles } from "../engine/segments.ts";
import { findProfile, identityOf, type ProfileView } from "../engine/profiles.ts";
import { normalizeEmail, normalizePhone } from "./contacts.ts";
import { money } from "./order_lines.ts";

/** How the commerce contact was found. */
export type MatchedBy = "email" | "shopify_customer_id" | "phone" | "contact_id" | "none";

/** A resolved customer: the profile (taking precedence) and the local commerce contact. */
export interface ResolvedCustomer {
  profile: ProfileView | null;
  contactId: string | null;
  matchedBy: MatchedBy;
}

const _UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Resolves an identifier by its shape: `@` = email; leading `+` = phone; all digits
 * = storefront customer id; a UUID = profile id, then contact id; anything else = profile id.
 * The contact is found by the identifier itself, else through the profile's identity (Shopify
 * id, then email, then phone). Null when neither store knows it (or only another brand does).
 */
export async function resolveCustomer(
  sql: Sql,
  brand: { brandId: string; scope: string },
  identifier: string,
): Promise<ResolvedCustomer | null> {
  const { brandId, scope } = brand;
  let profile: ProfileView | null = null;
  let contact: { id: string; by: MatchedBy } | null = null;
  if (identifier.includes("@")) {
    const email = normalizeEmail(identifier);
    profile = email ? await _profileBy(sql, scope, "email", email) : null;
    contact = email ? await _contactBy(sql, brandId, "email", email) : null;
  } else if (identifier.startsWith("+")) {
    const phone = normalizePhone(identifier);
    profile = phone ? await _profileBy(sql, scope, "phoneNumber", phone) : null;
    contact = phone ? await _contactBy(sql, brandId, "phone", phone) : null;
  } else if (/^\d+$/.test(identifier)) {
    profile = await _profileBy(sql, scope, "shopifyCustomerId", identifier);
    contact = await _contactBy(sql, brandId, "shopify_customer_id", identifier);
  } else {
    profile = await findProfile(sql, scope, identifier);
    if (!profile && _UUID.test(identifier)) {
      const [row] = await sql<{ id: string }[]>`
        select id from contacts where brand_id = ${brandId} and id = ${identifier}`;
      if (row) contact = { id: row.id, by: "contact_id" };
    }
  }
  if (profile && !contact) contact = await _contactOfProfile(sql, brandId, profile);
  if (!profile && !contact) return null;
  return { profile, contactId: contact?.id ?? null, matchedBy: contact?.by ?? "none" };
}

async function _profileBy(
  sql: Sql,
  scope: string,
  field: "email" | "phoneNumber" | "shopifyCustomerId",
  value: string,
): Promise<ProfileView | null> {
  // Case-insensitive for emails: profiles keep what the caller sent. The field is spelled out in
  // the statement so that it matches its expression index (migration 8).
  const key = {
    email: sql`lower(properties ->> 'email')`,
    phoneNumber: sql`lower(properties ->> 'phoneNumber')`,
    shopifyCustomerId: sql`lower(properties ->> 'shopifyCustomerId')`,
  }[field];
  const [row] = await sql<{ item_id: string }[]>`
    select item_id from profiles
    where scope = ${scope} and ${key} = lower(${value})
    order by (provenance = 'pixel'), created_at, item_id
    limit 1`;
  return row ? await findProfile(sql, scope, row.item_id) : null;
}

async function _contactBy(
  sql: Sql,
  brandId: string,
  column: "email" | "phone" | "shopify_customer_id",
  value: string,
): Promise<{ id: string; by: MatchedBy } | null> {
  const [row] = await sql<{ id: string }[]>`
    select id from contacts where brand_id = ${brandId} and ${sql(column)} = ${value}
    order by created_at limit 1`;
  return row ? { id: row.id, by: column } : null;
}

async function _contactOfProfile(
  sql: Sql,
  brandId: string,
  profile: ProfileView,
): Promise<{ id: string; by: MatchedBy } | null> {
  const props = profile.properties;
  const shopifyId = props.shopifyCustomerId == null ? null : String(props.shopifyCustomerId);
  const email = typeof props.email === "string" ? normalizeEmail(props.email) : null;
  const phone = typeof props.phoneNumber === "string" ? normalizePhone(props.phoneNumber) : null;
  return (shopifyId ? await _contactBy(sql, brandId, "shopify_customer_id", shopifyId) : null) ??
    (email ? await _contactBy(sql, brandId, "email", email) : null) ??
    (phone ? await _contactBy(sql, brandId, "phone", phone) : null);
}

/**
 * The unified customer record: profile, commerce, integrations, subscription. The profile's
 * segments are evaluated within `budget` (the brand's heavy-read share and time budget): those not
 * decided are listed in `segments_unknown`, never an error.
 */
export async function customerRecord(
  sql: Sql,
  brand: { brandId: string; scope: string },
  identifier: string,
  resolved: ResolvedCustomer,
  now: Date,
  budget: ReadBudget,
) {
  const profile = resolved.profile;
  const memberships = profile &&
    (await segmentsOfProfiles(sql, brand.scope, [profile.itemId], now, budget)).get(
      profile.itemId,
    );
  return {
    identifier,
    matched_by: resolved.matchedBy,
    scope: brand.scope,
    profile: profile && {
      id: profile.itemId,
      provenance: profile.provenance,
      identity: identityOf(profile.properties),
      consents: profile.consents ?? {},
      segments: memberships?.member ?? [],
      segments_unknown: memberships?.unknown ?? [],
      behavior: {
        nb_of_visits: (profile.properties.nbOfVisits as number | undefined) ?? null,
        first_visit: (profile.properties.firstVisit as string | undefined) ?? null,
        last_visit: (profile.properties.lastVisit as string | undefined) ?? null,
      },
    },
    commerce: resolved.contactId ? await _commerce(sql, resolved.contactId) : null,
    integrations: await integrationsOf(sql, brand.brandId),
    subscription: await subscriptionSummary(sql, resolved.contactId),
  };
}

/** Spend over completed orders: totals, count, average, first and last. */
async function _commerce(sql: Sql, contactId: string) {
  const [row] = await sql<{
    total: string | null;
    n: number;
    aov: string | null;
    currency: string | null;
    first: Date | null;
    last: Date | null;
  }[]>`
    select sum(total)::text as total, count(*)::int as n,
           round(sum(total) / nullif(count(*), 0), 2)::text as aov,
           mode() within group (order by currency_code) as currency,
           min(created_at) as first, max(created_at) as last
    from orders where contact_id = ${contactId} and state = 'complete'`;
  return {
    total_spend: money(row!.total ?? "0"),
    currency_code: row!.currency,
    order_count: row!.n,
    aov: money(row!.aov ?? "0"),
    first_order_at: row!.first?.toISOString() ?? null,
    last_order_at: row!.last?.toISOString() ?? null,
  };
}

/** A brand's storefront integrations: exactly these fields, never settings or credentials. */
export async function integrationsOf(sql: Sql, brandId: string) {
  const rows = await sql<{
    id: string;
    integration_id: string;
    is_enabled: boolean;
    status: string;
    connected_at: Date | null;
  }[]>`
    select id, integration_id, is_enabled, status, connected_at
    from integrations where brand_id = ${brandId} order by created_at`;
  return rows.map((r) => ({
    id: r.id,
    integration_id: r.integration_id,
    is_enabled: r.is_enabled,
    status: r.status,
    connected_at: r.connected_at?.toISOString() ?? null,
  }));
}

/** A contact's subscription summary. */
export async function subscriptionSummary(sql: Sql, contactId: string | null) {
  if (!contactId) {
    return { status: "none", active_count: 0, total_count: 0, next_billing_date: null };
  }
  const [row] = await sql<{ active: number; total: number; next: Date | null }[]>`
    select (count(*) filter (where status = 'active'))::int as active, count(*)::int as total,
           min(next_billing_date) filter (where status = 'active') as next
    from subscriptions where contact_id = ${contactId}`;
  return {
    status: row!.active > 0 ? "active" : row!.total > 0 ? "inactive" : "none",
    active_count: row!.active,
    total_count: row!.total,
    next_billing_date: row!.next?.toISOString() ?? null,
  };
}
