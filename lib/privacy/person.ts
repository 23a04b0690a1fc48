/**
 * Finding a person everywhere the brand holds them: the profiles whose identity carries the
 * identifier (every one of them, not only the customer record's first), the ids merged into
 * them, the commerce contacts, and every email and phone seen on any of these.
 *
 * @module
 */
import { normalizeEmail, normalizePhone } from "../commerce/contacts.ts";
import type { Sql, Tx } from "../store/db.ts";
import type { Identifier, IdentifierHasher } from "./identifiers.ts";

/** A person as the brand holds them. */
export interface Person {
  /** Profiles found and every id merged into them. */
  profileIds: string[];
  /** Of `profileIds`, the profiles themselves (not aliases). */
  rootIds: string[];
  contactIds: string[];
  emails: string[];
  phones: string[];
  shopifyCustomerIds: string[];
}

/** The brand a person is looked up in. */
export interface BrandScope {
  brandId: string;
  scope: string;
}

const _UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Each round follows contacts to profiles and back; two settle every link the stores keep.
const _ROUNDS = 3;

/**
 * Every trace of the identifiers in the brand. Profile ids resolve through merges to the
 * surviving profile; emails and phones match case-insensitively; a contact's UUID names it.
 */
export async function findPerson(
  sql: Sql | Tx,
  brand: BrandScope,
  identifiers: readonly Identifier[],
): Promise<Person> {
  const emails = new Set<string>();
  const phones = new Set<string>();
  const shopifyIds = new Set<string>();
  const roots = new Set<string>();
  const contacts = new Set<string>();
  const named: string[] = [];
  for (const { kind, value } of identifiers) {
    if (kind === "email") emails.add(value);
    else if (kind === "phone") phones.add(value);
    else if (kind === "shopify_customer_id") shopifyIds.add(value);
    else named.push(value);
  }
  if (named.length > 0) {
    const rows = await sql<{ id: string }[]>`
      select item_id as id from profiles where scope = ${brand.scope} and item_id = any(${named}::text[])
      union
      select profile_id from profile_aliases where scope = ${brand.scope} and alias_id = any(${named}::text[])`;
    for (const row of rows) roots.add(row.id);
    const uuids = named.filter((id) => _UUID.test(id));
    if (uuids.length > 0) {
      const found = await sql<{ id: string }[]>`
        select id from contacts where brand_id = ${brand.brandId} and id = any(${uuids}::text[])`;
      for (const row of found) contacts.add(row.id);
    }
  }
  for (let round = 0; round < _ROUNDS; round++) {
    const before = roots.size + contacts.size + emails.size + phones.size + shopifyIds.size;
    const contactRows = await sql<
      {
        id: string;
        email: string | null;
        phone: string | null;
        shopify_customer_id: string | null;
      }[]
    >`
      select id, email, phone, shopify_customer_id from contacts
      where brand_id = ${brand.brandId}
        and (id = any(${[...contacts]}::text[]) or email = any(${[...emails]}::text[])
          or phone = any(${[...phones]}::text[]) or shopify_customer_id = any(${[
      ...shopifyIds,
    ]}::text[]))`;
    for (const row of contactRows) {
      contacts.add(row.id);
      if (row.email) emails.add(row.email);
      if (row.phone) phones.add(row.phone);
      if (row.shopify_customer_id) shopifyIds.add(row.shopify_customer_id);
    }
    // Spelled as the expression indexes are (migration 8).
    const profileRows = await sql<
      { item_id: string; email: string | null; phone: string | null; shopify: string | null }[]
    >`
      select item_id, properties ->> 'email' as email, properties ->> 'phoneNumber' as phone,
             properties ->> 'shopifyCustomerId' as shopify
      from profiles
      where scope = ${brand.scope}
        and (item_id = any(${[...roots]}::text[])
          or lower(properties ->> 'email') = any(${[...emails]}::text[])
          or lower(properties ->> 'phoneNumber') = any(${
      [...phones].map((p) => p.toLowerCase())
    }::text[])
          or lower(properties ->> 'shopifyCustomerId') = any(${[...shopifyIds]}::text[]))`;
    for (const row of profileRows) {
      roots.add(row.item_id);
      const email = normalizeEmail(row.email);
      const phone = normalizePhone(row.phone);
      if (email) emails.add(email);
      if (phone) phones.add(phone);
      if (row.shopify) shopifyIds.add(row.shopify);
    }
    if (roots.size + contacts.size + emails.size + phones.size + shopifyIds.size === before) break;
  }
  const aliases = roots.size === 0 ? [] : await sql<{ alias_id: string }[]>`
    select alias_id from profile_aliases
    where scope = ${brand.scope} and profile_id = any(${[...roots]}::text[])`;
  return {
    profileIds: [...new Set([...roots, ...aliases.map((a) => a.alias_id)])].sort(),
    rootIds: [...roots].sort(),
    contactIds: [...contacts].sort(),
    emails: [...emails].sort(),
    phones: [...phones].sort(),
    shopifyCustomerIds: [...shopifyIds].sort(),
  };
}

/**
 * The keyed hashes the engine's blocks match events by: the person's profile ids, emails and
 * phones, and the request's own identifiers of those kinds (a person not seen yet is blocked by
 * what the request named).
 */
export function personHashes(
  person: Person,
  identifiers: readonly Identifier[],
  hasher: IdentifierHasher,
): string[] {
  const all: Identifier[] = [
    ...identifiers.filter((i) => i.kind !== "shopify_customer_id"),
    ...person.profileIds.map((value) => ({ kind: "profile_id" as const, value })),
    ...person.emails.map((value) => ({ kind: "email" as const, value })),
    ...person.phones.map((value) => ({ kind: "phone" as const, value })),
  ];
  return [...new Set(all.map((identifier) => hasher.hash(identifier)))];
}
