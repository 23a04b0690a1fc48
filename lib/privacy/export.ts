/**
 * The export of a person: one JSON document with everything the brand holds about them, kept
 * for download (`GET /cdp/privacy/requests/{id}/download`) until the person is erased or the shop
 * redacted.
 *
 * @module
 */
import { type ReadBudget, segmentsOfProfiles } from "../engine/segments.ts";
import type { Sql } from "../store/db.ts";
import type { Person } from "./person.ts";

/**
 * The document of `person`: profiles (with their consents) and merged ids, events, sessions,
 * segment memberships, contacts, orders with their lines, subscriptions. Segment memberships are
 * evaluated within `budget`; those not decided are listed under `segments_unknown`. The events
 * are written by the database as JSON text, so a long history costs no row objects here.
 */
export async function buildExport(
  sql: Sql,
  target: { scope: string; brandId: string; person: Person; now: Date; budget: ReadBudget },
): Promise<{ document: string; counts: Record<string, number> }> {
  const { scope, brandId, person } = target;
  const ids = person.profileIds;
  const profiles = await sql<
    { id: string; provenance: string; properties: unknown; consents: unknown }[]
  >`
    select item_id as id, provenance, properties, consents from profiles
    where scope = ${scope} and item_id = any(${person.rootIds}::text[]) order by item_id`;
  const aliases = await sql<{ profile_id: string; alias_id: string }[]>`
    select profile_id, alias_id from profile_aliases
    where scope = ${scope} and profile_id = any(${person.rootIds}::text[]) order by alias_id`;
  const [events] = await sql<{ n: number; list: string }[]>`
    select count(*)::int as n, coalesce(json_agg(json_build_object(
             'itemId', id, 'eventType', event_type, 'profileId', profile_id,
             'sessionId', session_id, 'timeStamp', time_stamp, 'properties', properties,
             'flattenedProperties', flattened_properties, 'target', target, 'source', source)
           order by time_stamp, id), '[]')::text as list
    from events where scope = ${scope} and profile_id = any(${ids}::text[])`;
  const sessions = await sql`
    select item_id as "itemId", profile_id as "profileId", first_event_at as "firstEventAt",
           last_event_at as "lastEventAt", event_count as "eventCount"
    from sessions where scope = ${scope} and profile_id = any(${ids}::text[])
    order by first_event_at`;
  const memberships = await segmentsOfProfiles(
    sql,
    scope,
    profiles.map((p) => p.id),
    target.now,
    target.budget,
  );
  const contacts = await sql`
    select id, shopify_customer_id, email, phone, first_name, last_name, created_at, updated_at
    from contacts where brand_id = ${brandId} and id = any(${person.contactIds}::text[])
    order by created_at`;
  const orders = await sql`
    select id, external_id, number, state, billing_status, total::text as total, currency_code,
           contact_id, created_at, processed_at, updated_at, line_items
    from orders where brand_id = ${brandId} and contact_id = any(${person.contactIds}::text[])
    order by created_at`;
  const subscriptions = await sql`
    select id, external_id, status, next_billing_date, contact_id, created_at, updated_at
    from subscriptions where brand_id = ${brandId} and contact_id = any(${person.contactIds}::text[])
    order by created_at`;
  const head = {
    scope,
    exported_at: target.now.toISOString(),
    profiles: profiles.map((p) => ({
      ...p,
      merged_ids: aliases.filter((a) => a.profile_id === p.id).map((a) => a.alias_id),
      segments: memberships.get(p.id)?.member ?? [],
      segments_unknown: memberships.get(p.id)?.unknown ?? [],
    })),
    sessions,
    contacts,
    orders,
    subscriptions,
  };
  // The events, already JSON, go in last without being parsed.
  const document = `${JSON.stringify(head).slice(0, -1)},"events":${events!.list}}`;
  return {
    document,
    counts: {
      profiles: profiles.length,
      merged_ids: aliases.length,
      events: events!.n,
      sessions: sessions.length,
      contacts: contacts.length,
      orders: orders.length,
      subscriptions: subscriptions.length,
    },
  };
}
