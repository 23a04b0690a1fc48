/**
 * Profile reads: the profile view, identity fields, and pages of profiles, their events and
 * sessions.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { countToWindow } from "../store/offset_window.ts";

/** The identity fields projected from a profile. */
export const IDENTITY_FIELDS = [
  "email",
  "phoneNumber",
  "firstName",
  "lastName",
  "city",
  "countryName",
  "zipCode",
  "shopDomain",
  "shopifyCustomerId",
  "mergeIdentifier",
] as const;

/** `bucket` of GET /cdp/profiles: customers = server, anonymous = pixel, merged = merged. */
export type Bucket = "customers" | "anonymous" | "merged";

const _PROVENANCE: Record<Bucket, string> = {
  customers: "server",
  anonymous: "pixel",
  merged: "merged",
};

/** Sorts of profile lists; only the default is cursor-eligible (keyset on item_id). */
export const PROFILE_SORTS = {
  "itemId.keyword:asc": "p.item_id asc",
  "itemId.keyword:desc": "p.item_id desc",
  "properties.lastVisit:desc": "p.last_visit desc nulls last, p.item_id asc",
  "properties.lastVisit:asc": "p.last_visit asc nulls last, p.item_id asc",
  "properties.firstVisit:desc": "p.first_visit desc nulls last, p.item_id asc",
  "properties.firstVisit:asc": "p.first_visit asc nulls last, p.item_id asc",
  "properties.nbOfVisits:desc": "p.nb_of_visits desc, p.item_id asc",
  "properties.nbOfVisits:asc": "p.nb_of_visits asc, p.item_id asc",
} as const;

/** Sorts of a profile's events; only the default is cursor-eligible (keyset on the event id). */
export const EVENT_SORTS = {
  "itemId.keyword:asc": "e.id asc",
  "itemId.keyword:desc": "e.id desc",
  "timeStamp:asc": "e.time_stamp asc, e.id asc",
  "timeStamp:desc": "e.time_stamp desc, e.id asc",
} as const;

/** A profile as the API shows it. */
export interface ProfileView {
  itemId: string;
  properties: Record<string, unknown>;
  provenance: "server" | "pixel" | "merged";
  /** Unomi's consents map (lib/engine/consents.ts), on a profile read alone. */
  consents?: Record<string, unknown>;
}

interface _ProfileRow {
  item_id: string;
  properties: Record<string, unknown>;
  consents?: Record<string, unknown>;
  provenance: "server" | "pixel" | "merged";
  first_visit: Date | null;
  last_visit: Date | null;
  nb_of_visits: number;
}

/** The identity projection of a profile's properties (present fields only). */
export function identityOf(properties: Record<string, unknown>): Record<string, unknown> {
  const identity: Record<string, unknown> = {};
  for (const field of IDENTITY_FIELDS) {
    if (properties[field] !== undefined && properties[field] !== null) {
      identity[field] = properties[field];
    }
  }
  return identity;
}

/** Shapes a profile row: the visit columns appear as properties, as in Unomi. */
export function profileView(row: _ProfileRow): ProfileView {
  return {
    itemId: row.item_id,
    properties: {
      ...row.properties,
      ...(row.first_visit ? { firstVisit: row.first_visit.toISOString() } : {}),
      ...(row.last_visit ? { lastVisit: row.last_visit.toISOString() } : {}),
      nbOfVisits: row.nb_of_visits,
    },
    provenance: row.provenance,
    ...(row.consents ? { consents: row.consents } : {}),
  };
}

/** Finds a profile of the scope by its id or any id it absorbed; null when absent. */
export async function findProfile(
  sql: Sql,
  scope: string,
  id: string,
): Promise<ProfileView | null> {
  const [row] = await sql<_ProfileRow[]>`
    select p.item_id, p.properties, p.consents, p.provenance, p.first_visit, p.last_visit,
           p.nb_of_visits
    from profiles p
    where p.scope = ${scope}
      and p.item_id = coalesce(
        (select a.profile_id from profile_aliases a where a.scope = ${scope} and a.alias_id = ${id}),
        ${id})`;
  return row ? profileView(row) : null;
}

/** Every id whose events belong to the profile: its own and those it absorbed. */
export async function profileIds(sql: Sql, scope: string, profileId: string): Promise<string[]> {
  const aliases = await sql<{ alias_id: string }[]>`
    select alias_id from profile_aliases where scope = ${scope} and profile_id = ${profileId}`;
  return [profileId, ...aliases.map((a) => a.alias_id)];
}

/** Filters of a profile list. */
export interface ProfileListQuery {
  bucket: Bucket;
  q?: string;
  sort: keyof typeof PROFILE_SORTS;
  limit: number;
  offset: number;
  /** Keyset position: list item ids after this one (default sort only). */
  after?: string;
}

/** One page of a scope's profiles in one bucket, plus the (capped) total. */
export async function listProfiles(
  sql: Sql,
  scope: string,
  query: ProfileListQuery,
): Promise<{ list: ProfileView[]; total: number; more: boolean }> {
  const where = sql`
    p.scope = ${scope} and p.provenance = ${_PROVENANCE[query.bucket]}
    ${query.q ? _search(sql, query.q) : sql``}`;
  const keyset = query.after === undefined ? sql`` : sql`and p.item_id > ${query.after}`;
  // The page and its count are independent: sent together, they cost one round trip.
  const [rows, total] = await Promise.all([
    sql<_ProfileRow[]>`
      select p.item_id, p.properties, p.provenance, p.first_visit, p.last_visit, p.nb_of_visits
      from profiles p
      where ${where} ${keyset}
      order by ${sql.unsafe(PROFILE_SORTS[query.sort]) /* from the closed map above */}
      limit ${query.limit + 1}
      offset ${query.after === undefined ? query.offset : 0}`,
    countToWindow(sql, sql`select 1 from profiles p where ${where}`),
  ]);
  return {
    list: rows.slice(0, query.limit).map(profileView),
    total,
    more: rows.length > query.limit,
  };
}

/** Case-insensitive substring search over the id and the main identity fields. */
function _search(sql: Sql, q: string) {
  const needle = q.toLowerCase();
  // strpos, not LIKE: the caller's % and _ are plain characters.
  return sql`and (
    strpos(lower(p.item_id), ${needle}) > 0
    or strpos(lower(p.properties ->> 'email'), ${needle}) > 0
    or strpos(lower(p.properties ->> 'firstName'), ${needle}) > 0
    or strpos(lower(p.properties ->> 'lastName'), ${needle}) > 0
    or strpos(lower(p.properties ->> 'phoneNumber'), ${needle}) > 0
    or strpos(lower(p.properties ->> 'shopifyCustomerId'), ${needle}) > 0)`;
}

/** An event as the API shows it. */
export interface EventView {
  itemId: string;
  eventType: string;
  profileId: string;
  sessionId: string;
  timeStamp: string;
  properties: Record<string, unknown>;
  flattenedProperties: Record<string, unknown>;
  target: Record<string, unknown> | null;
  source: "server" | "pixel";
  scope: string;
}

/** Filters of a profile's event list. */
export interface EventListQuery {
  eventType?: string;
  from?: Date;
  to?: Date;
  sort: keyof typeof EVENT_SORTS;
  limit: number;
  offset: number;
  after?: string;
}

/** One page of the scope's events of the given profile ids. */
export async function listProfileEvents(
  sql: Sql,
  scope: string,
  ids: string[],
  query: EventListQuery,
): Promise<{ list: EventView[]; total: number; more: boolean }> {
  const where = sql`
    e.scope = ${scope} and ${
    // An unmerged profile (the common case) gets a plain equality the planner estimates well.
    ids.length === 1 ? sql`e.profile_id = ${ids[0]!}` : sql`e.profile_id = any(${ids}::text[])`}
    ${query.eventType ? sql`and e.event_type = ${query.eventType}` : sql``}
    ${query.from ? sql`and e.time_stamp >= ${query.from}` : sql``}
    ${query.to ? sql`and e.time_stamp <= ${query.to}` : sql``}`;
  const keyset = query.after === undefined ? sql`` : sql`and e.id > ${query.after}`;
  const [rows, total] = await Promise.all([
    sql<{
      id: string;
      event_type: string;
      profile_id: string;
      session_id: string;
      time_stamp: Date;
      properties: Record<string, unknown>;
      flattened_properties: Record<string, unknown>;
      target: Record<string, unknown> | null;
      source: "server" | "pixel";
    }[]>`
    select e.id, e.event_type, e.profile_id, e.session_id, e.time_stamp, e.properties,
           e.flattened_properties, e.target, e.source
    from events e
    where ${where} ${keyset}
    order by ${sql.unsafe(EVENT_SORTS[query.sort])}
    limit ${query.limit + 1}
    offset ${query.after === undefined ? query.offset : 0}`,
    countToWindow(sql, sql`select 1 from events e where ${where}`),
  ]);
  return {
    list: rows.slice(0, query.limit).map((r) => ({
      itemId: r.id,
      eventType: r.event_type,
      profileId: r.profile_id,
      sessionId: r.session_id,
      timeStamp: r.time_stamp.toISOString(),
      properties: r.properties,
      flattenedProperties: r.flattened_properties,
      target: r.target,
      source: r.source,
      scope,
    })),
    total,
    more: rows.length > query.limit,
  };
}

/** A session as the API shows it. */
export interface SessionView {
  itemId: string;
  profileId: string;
  firstEventAt: string;
  lastEventAt: string;
  eventCount: number;
  /** Derived from the context of its first event (lib/engine/session_context.ts). */
  properties: Record<string, unknown>;
}

/** A profile's sessions, most recent first. */
export async function listProfileSessions(
  sql: Sql,
  scope: string,
  profileId: string,
  page: { limit: number; offset: number },
): Promise<{ list: SessionView[]; total: number }> {
  const rows = await sql<{
    item_id: string;
    profile_id: string;
    first_event_at: Date;
    last_event_at: Date;
    event_count: number;
    properties: Record<string, unknown>;
  }[]>`
    select item_id, profile_id, first_event_at, last_event_at, event_count, properties
    from sessions
    where scope = ${scope} and profile_id = ${profileId}
    order by first_event_at desc, item_id
    limit ${page.limit} offset ${page.offset}`;
  const total = await countToWindow(
    sql,
    sql`select 1 from sessions where scope = ${scope} and profile_id = ${profileId}`,
  );
  return {
    list: rows.map((r) => ({
      itemId: r.item_id,
      profileId: r.profile_id,
      firstEventAt: r.first_event_at.toISOString(),
      lastEventAt: r.last_event_at.toISOString(),
      eventCount: r.event_count,
      properties: r.properties,
    })),
    total,
  };
}

/**
 * Which of `ids` name an identified profile of the scope: a server or merged profile, or an id a
 * merge absorbed (an alias, whose profile is merged). The pixel proxy refuses events naming one.
 */
export async function identifiedProfileIds(
  sql: Sql,
  scope: string,
  ids: string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`
    select x.id from unnest(${ids}::text[]) as x(id)
    where exists (select 1 from profile_aliases a where a.scope = ${scope} and a.alias_id = x.id)
       or exists (select 1 from profiles p
                  where p.scope = ${scope} and p.item_id = x.id and p.provenance <> 'pixel')`;
  return new Set(rows.map((r) => r.id));
}
