/**
 * Applying a batch of events in one transaction: idempotent by event id, profiles created or
 * merged, visits and sessions counted, `updateProperties` applied. A pixel batch (from the
 * anonymous browser proxy) writes only pixel profiles, and its client times are clamped to a
 * window around its receive time.
 *
 * @module
 */
import { databaseFailure, jsonParam, type Sql, type Tx } from "../store/db.ts";
import {
  type ApplyResult,
  checkEvent,
  type CommitGate,
  type EventAdmission,
  type EventBatch,
  type EventSource,
  type IngestEvent,
} from "./engine.ts";
import { EVENT_REGISTRY_VERSION } from "./event_types.ts";
import { applyUpdateProperties, type UpdatePropertiesPayload } from "./update_properties.ts";
import { applyConsent, type Consent, mergeConsents } from "./consents.ts";
import { scopeWritesClosed, SHOP_ERASED_MESSAGE } from "../tenancy/brands.ts";
import { type SessionProperties, sessionPropertiesOf } from "./session_context.ts";
import { assignSessionIds } from "./session_windows.ts";

interface _EventRow {
  id: string;
  /** The event's place in the group (batch order, then event order): ties of time stamps. */
  index: number;
  /** Where its result goes: which batch, and which event of it. */
  batch: number;
  position: number;
  received_at: string;
  profile_id: string;
  /** The caller's session id, or the one the 30-minute rule gives it (session_windows.ts). */
  session_id: string;
  /** Whether the caller named the session. */
  own_session: boolean;
  /** The session properties of the event's context, if it has one (session_context.ts). */
  session_context: SessionProperties | null;
  event_type: string;
  time_stamp: string;
  properties: Record<string, unknown>;
  flattened_properties: Record<string, unknown>;
  target: IngestEvent["target"] | null;
}

/** What the batches of one group share. */
interface _Group {
  scope: string;
  source: EventSource;
}

interface _ProfileRow {
  item_id: string;
  properties: Record<string, unknown>;
  consents: Record<string, Consent>;
  provenance: "server" | "pixel" | "merged";
  first_visit: Date | null;
  last_visit: Date | null;
  nb_of_visits: number;
  created_at: Date;
}

/**
 * How far from its batch's receive time a pixel event's own `timeStamp` may lie: anything
 * earlier or later is clamped to this window (an anonymous browser must not set a profile's
 * lastVisit to 2099, nor backdate its history). A pixel sends within seconds; a day or two of
 * buffering (a tab restored offline) is still recorded at its own time.
 */
export const PIXEL_TIME_WINDOW = { pastMs: 72 * 3_600_000, futureMs: 5 * 60_000 } as const;

/** The result of a pixel event naming a profile that is not a pixel profile. */
export const PIXEL_NOT_ANONYMOUS =
  "the pixel proxy writes only anonymous profiles; this profile id belongs to an identified " +
  "(server or merged) profile";

/** How a batch is applied: the clock, the caller's budget and gate, the admission hook. */
export interface ApplyOptions {
  now: () => Date;
  deadline?: number;
  gate?: CommitGate;
  /** Drops events before they are stored (privacy's erasures and suppressions). */
  admission?: EventAdmission;
}

/**
 * Applies a batch in one transaction, set-based (a handful of statements whatever the batch
 * size) and idempotent: an event id already stored is skipped whole, so a redelivered message
 * changes nothing and counts no visit twice.
 *
 * An event the database refuses for its data (a `data` {@linkcode databaseFailure}) fails alone: the
 * batch is applied again in one transaction, halved under savepoints until each refused event
 * is on its own, and that event's result is a 400 carrying the database's message. Any other
 * error (connection, timeout, deadline) throws: nothing was stored and a retry may work. A scope
 * whose shop was erased (shop/redact) stores nothing: every event's result is a 403.
 */
export async function applyEventBatch(
  sql: Sql,
  batch: EventBatch,
  options: ApplyOptions,
): Promise<ApplyResult[]> {
  return (await applyEventBatches(sql, [batch], options))[0]!;
}

/**
 * Applies several batches of one scope and source as {@linkcode applyEventBatch} applies one, in
 * one transaction and the same handful of statements, with the effects of applying them one
 * after the other in the order given; the results are per batch. An event id given twice is
 * applied once: the later copy's result is that of an event already stored.
 */
export async function applyEventBatches(
  sql: Sql,
  batches: EventBatch[],
  options: ApplyOptions,
): Promise<ApplyResult[][]> {
  const first = batches[0];
  const results: ApplyResult[][] = batches.map(() => []);
  if (!first) return results;
  if (batches.some((b) => b.scope !== first.scope || b.source !== first.source)) {
    throw new Error("the batches of one group must share their scope and source");
  }
  const group = { scope: first.scope, source: first.source };
  const rows: _EventRow[] = [];
  const copies: _EventRow[] = [];
  const seen = new Set<string>();
  const now = options.now();
  const receivedNow = now.toISOString();
  batches.forEach((batch, batchIndex) => {
    // Checked at the edge under this version: only what a hand edit could break is looked at.
    const checked = batch.checked === EVENT_REGISTRY_VERSION;
    batch.events.forEach((event, position) => {
      const problem = (checked ? null : checkEvent(event)) ?? _checkTimeStamp(event.timeStamp);
      if (problem) {
        results[batchIndex]![position] = { ok: false, ...problem };
        return;
      }
      const timeStamp = event.timeStamp === undefined
        ? receivedNow
        : group.source === "pixel"
        ? clampPixelTime(event.timeStamp, batch.receivedAt)
        : new Date(event.timeStamp).toISOString();
      const row: _EventRow = {
        id: event.id,
        index: rows.length + copies.length,
        batch: batchIndex,
        position,
        received_at: batch.receivedAt,
        profile_id: event.profileId,
        session_id: event.sessionId ?? "",
        own_session: event.sessionId !== undefined,
        session_context: sessionPropertiesOf(event.properties),
        event_type: event.eventType,
        time_stamp: timeStamp,
        properties: event.properties ?? {},
        flattened_properties: event.flattenedProperties ?? {},
        // Stored as sent: the edge admitted exactly the fields the contract allows.
        target: event.target ?? null,
      };
      if (seen.has(row.id)) copies.push(row);
      else {
        seen.add(row.id);
        rows.push(row);
      }
    });
  });
  if (rows.length === 0) return results;

  const refused = new Map<string, string>();
  // Pixel events refused for the profile they name (decided under its lock).
  const forbidden = new Map<string, string>();
  // Events the admission hook dropped (decided under the scope's write lock).
  let dropped: ReadonlySet<string> = new Set();
  const admitted = async (tx: Tx): Promise<_EventRow[] | null> => {
    if (await scopeWritesClosed(tx, group.scope)) return null;
    if (!options.admission) return rows;
    dropped = await options.admission.drop(tx, group.scope, rows.map(_admittedEvent));
    return dropped.size === 0 ? rows : rows.filter((row) => !dropped.has(row.id));
  };
  let updated: Map<string, boolean> | null;
  try {
    // The common case pays nothing for the isolation: no savepoint unless the batch fails.
    updated = await _transaction(sql, options, async (tx) => {
      const kept = await admitted(tx);
      if (kept === null) return null;
      return kept.length === 0 ? new Map() : await _applyRows(tx, group, kept, now, forbidden);
    });
  } catch (err) {
    if (databaseFailure(err) !== "data") throw err;
    forbidden.clear();
    if (rows.length === 1) {
      refused.set(rows[0]!.id, dataErrorMessage(err));
      updated = new Map();
    } else {
      updated = await _transaction(sql, options, async (tx) => {
        const kept = await admitted(tx);
        if (kept === null) return null;
        const changed = new Map<string, boolean>();
        // In the order the whole batch applies them, so the parts have the same effects.
        const ordered = [...kept].sort((a, b) =>
          a.time_stamp.localeCompare(b.time_stamp) || a.index - b.index
        );
        const half = Math.ceil(ordered.length / 2);
        for (const part of [ordered.slice(0, half), ordered.slice(half)]) {
          await _isolate(tx, group, part, now, changed, refused, forbidden);
        }
        return changed;
      });
    }
  }
  if (updated === null) {
    // shop/redact erased the scope: a batch queued before it must not bring its data back.
    for (const row of [...rows, ...copies]) {
      results[row.batch]![row.position] = { ok: false, status: 403, error: SHOP_ERASED_MESSAGE };
    }
    return results;
  }
  for (const row of rows) {
    const error = refused.get(row.id);
    const stored = updated.has(row.id);
    const changed = stored && updated.get(row.id)! ? 1 : 0;
    results[row.batch]![row.position] = dropped.has(row.id)
      ? { ok: true, status: 200, result: { updated: 0, processedItems: 0 } }
      : error !== undefined
      ? { ok: false, status: 400, error }
      : forbidden.has(row.id)
      ? { ok: false, status: 403, error: forbidden.get(row.id)! }
      : { ok: true, status: 200, result: { updated: changed, processedItems: stored ? 1 : 0 } };
  }
  for (const copy of copies) {
    results[copy.batch]![copy.position] = refused.has(copy.id)
      ? { ok: false, status: 400, error: refused.get(copy.id)! }
      : forbidden.has(copy.id)
      ? { ok: false, status: 403, error: forbidden.get(copy.id)! }
      : { ok: true, status: 200, result: { updated: 0, processedItems: 0 } };
  }
  return results;
}

function _admittedEvent(row: _EventRow) {
  return {
    id: row.id,
    profileId: row.profile_id,
    receivedAt: row.received_at,
    properties: row.properties,
  };
}

/** The database's message for a data error, with its detail and SQLSTATE; bounded. */
export function dataErrorMessage(err: unknown): string {
  const { message, detail, code } = err as { message?: string; detail?: string; code?: string };
  const text = `${message ?? String(err)}${detail ? `: ${detail}` : ""} (SQLSTATE ${code})`;
  return text.length > 500 ? `${text.slice(0, 499)}…` : text;
}

/**
 * Runs `fn` in a transaction under the batch's deadline, if it has one, and commits only when
 * the gate, if any, lets it.
 */
async function _transaction<T>(
  sql: Sql,
  options: { deadline?: number; gate?: CommitGate },
  fn: (tx: Tx) => Promise<T>,
): Promise<T> {
  return await sql.begin(async (tx) => {
    if (options.deadline !== undefined) {
      const remaining = Math.floor(options.deadline - Date.now());
      if (remaining <= 0) throw new Error("deadline exceeded before the batch started");
      await tx`select set_config('statement_timeout', ${String(remaining)}, true)`;
    }
    const result = await fn(tx);
    // The last chance to refuse: past the budget the caller has answered 503, so commit nothing.
    if (options.deadline !== undefined && Date.now() > options.deadline) {
      throw new Error("deadline exceeded; the batch was rolled back");
    }
    // Nothing is awaited from here to the driver's COMMIT: the gate's answer is the outcome's.
    if (options.gate && !options.gate.beginCommit()) {
      throw new Error("the budget ran out before the commit; the batch was rolled back");
    }
    return result;
  }) as T;
}

/**
 * Applies `rows` under a savepoint; on a data error, rolls them back and applies each half the
 * same way, down to single events, which are then refused. A few refused events among n cost
 * O(log n) savepoints each.
 */
async function _isolate(
  tx: Tx,
  group: _Group,
  rows: _EventRow[],
  now: Date,
  changed: Map<string, boolean>,
  refused: Map<string, string>,
  forbidden: Map<string, string>,
): Promise<void> {
  try {
    const part = await tx.savepoint((sp) => _applyRows(sp, group, rows, now, forbidden));
    for (const [id, value] of part as Map<string, boolean>) changed.set(id, value);
  } catch (err) {
    if (databaseFailure(err) !== "data") throw err;
    if (rows.length === 1) {
      refused.set(rows[0]!.id, dataErrorMessage(err));
      return;
    }
    const half = Math.ceil(rows.length / 2);
    await _isolate(tx, group, rows.slice(0, half), now, changed, refused, forbidden);
    await _isolate(tx, group, rows.slice(half), now, changed, refused, forbidden);
  }
}

// The edge accepts only ISO 8601 date-times; a message queued by an older version, or edited by
// hand, may hold one JavaScript cannot read, which must not fail the whole batch.
function _checkTimeStamp(timeStamp: string | undefined): { status: number; error: string } | null {
  if (timeStamp === undefined || !Number.isNaN(Date.parse(timeStamp))) return null;
  return { status: 400, error: `timeStamp ${JSON.stringify(timeStamp)} is not a date-time` };
}

/**
 * A pixel event's own time clamped to {@linkcode PIXEL_TIME_WINDOW} around its batch's receive
 * time, as an ISO 8601 instant.
 */
export function clampPixelTime(timeStamp: string, receivedAt: string): string {
  const time = Date.parse(timeStamp);
  const received = Date.parse(receivedAt);
  if (Number.isNaN(received)) return new Date(time).toISOString();
  const earliest = received - PIXEL_TIME_WINDOW.pastMs;
  const latest = received + PIXEL_TIME_WINDOW.futureMs;
  return new Date(Math.min(Math.max(time, earliest), latest)).toISOString();
}

/**
 * Stores the rows; returns, for each newly stored event id, whether it changed its profile. A
 * pixel group first sets aside (in `forbidden`, with the reason) the rows naming a profile that
 * is not a pixel profile; they store nothing.
 */
async function _applyRows(
  tx: Tx,
  group: _Group,
  rows: _EventRow[],
  now: Date,
  forbidden: Map<string, string>,
): Promise<Map<string, boolean>> {
  const { scope, source } = group;
  // First: its profile locks come before any row lock of the batch.
  await assignSessionIds(tx, scope, rows);
  if (source === "pixel") {
    // An earlier attempt (a rolled-back part) decided nothing: decide again under this one's locks.
    for (const row of rows) forbidden.delete(row.id);
    const anonymous = await _lockPixelProfiles(tx, scope, rows, now);
    const allowed = rows.filter((row) => anonymous.has(row.profile_id));
    for (const row of rows) {
      if (!anonymous.has(row.profile_id)) forbidden.set(row.id, PIXEL_NOT_ANONYMOUS);
    }
    if (allowed.length === 0) return new Map();
    rows = allowed;
  }
  if (rows.every((row) => !_needsProfileLogic(row, source))) {
    return await _applyVisitsOnly(tx, group, rows, now);
  }
  const inserted = await tx<{ id: string }[]>`
    insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                        flattened_properties, target, source, received_at)
    select ${scope}, x.id, x.profile_id, x.session_id, x.event_type, x.time_stamp, x.properties,
           x.flattened_properties, x.target, ${source}, x.received_at
    from jsonb_to_recordset(${jsonParam(tx, rows)}::jsonb) as x(
      id text, profile_id text, session_id text, event_type text, time_stamp timestamptz,
      properties jsonb, flattened_properties jsonb, target jsonb, received_at timestamptz)
    on conflict (scope, id) do nothing
    returning id`;
  const insertedIds = new Set(inserted.map((r) => r.id));
  const fresh = rows.filter((row) => insertedIds.has(row.id))
    .sort((a, b) => a.time_stamp.localeCompare(b.time_stamp) || a.index - b.index);
  const outcome = new Map<string, boolean>();
  if (fresh.length === 0) return outcome;

  const master = await _resolveAliases(tx, scope, [...new Set(fresh.map((r) => r.profile_id))]);
  const profileIds = [...new Set(master.values())].sort();
  // Ensure every profile exists, then lock them all in one order: no lost update, no deadlock.
  const created = new Set(
    (await tx<{ item_id: string }[]>`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      select ${scope}, x.item_id, jsonb_build_object('shopDomain', ${scope}::text), ${source},
             ${now}, ${now}
      from unnest(${profileIds}::text[]) as x(item_id)
      on conflict (scope, item_id) do nothing
      returning item_id`).map((r) => r.item_id),
  );
  const profiles = new Map(
    (await tx<_ProfileRow[]>`
      select item_id, properties, consents, provenance, first_visit, last_visit, nb_of_visits,
             created_at
      from profiles
      where scope = ${scope} and item_id = any(${profileIds}::text[])
      order by item_id
      for update`).map((p) => [p.item_id, p]),
  );

  const newVisits = await _upsertSessions(tx, scope, fresh, master);
  const touched = new Set<string>();
  const mergeChecks: { profileId: string; mergeIdentifier: string }[] = [];
  const targetMerges: { profileId: string; otherId: string }[] = [];
  for (const row of fresh) {
    const profile = profiles.get(master.get(row.profile_id)!)!;
    let changed = false;
    if (row.event_type === "updateProperties") {
      const before = profile.properties.mergeIdentifier;
      const next = applyUpdateProperties(
        profile.properties,
        row.properties as UpdatePropertiesPayload,
      );
      // The scope stamp is the engine's, never the caller's.
      next.properties.shopDomain = scope;
      if (next.changed) {
        profile.properties = next.properties;
        changed = true;
        const after = profile.properties.mergeIdentifier;
        if (typeof after === "string" && after !== "" && after !== before) {
          mergeChecks.push({ profileId: profile.item_id, mergeIdentifier: after });
        }
      }
    }
    if (row.event_type === "modifyConsent") {
      const consents = applyConsent(profile.consents, row.properties, scope, row.time_stamp);
      if (consents) {
        profile.consents = consents;
        changed = true;
      }
    }
    const ts = new Date(row.time_stamp);
    if (!profile.first_visit || ts < profile.first_visit) profile.first_visit = ts;
    if (!profile.last_visit || ts > profile.last_visit) profile.last_visit = ts;
    if (source === "server" && profile.provenance === "pixel" && !created.has(profile.item_id)) {
      // A server event naming a pixel profile links a server identity to it. The reverse is
      // never trusted: pixel events come from unauthenticated browsers.
      profile.provenance = "merged";
      changed = true;
    }
    if (
      source === "server" && row.target?.itemType === "profile" &&
      row.target.itemId !== row.profile_id
    ) {
      targetMerges.push({ profileId: profile.item_id, otherId: row.target.itemId });
    }
    touched.add(profile.item_id);
    outcome.set(row.id, changed);
  }
  for (const [profileId, visits] of newVisits) profiles.get(profileId)!.nb_of_visits += visits;

  const writes = [...touched].map((id) => {
    const p = profiles.get(id)!;
    return {
      item_id: id,
      properties: p.properties,
      consents: p.consents,
      provenance: p.provenance,
      first_visit: p.first_visit?.toISOString() ?? null,
      last_visit: p.last_visit?.toISOString() ?? null,
      nb_of_visits: p.nb_of_visits,
    };
  });
  await tx`
    update profiles p
    set properties = x.properties, consents = x.consents, provenance = x.provenance,
        first_visit = x.first_visit, last_visit = x.last_visit, nb_of_visits = x.nb_of_visits,
        updated_at = ${now}
    from jsonb_to_recordset(${jsonParam(tx, writes)}::jsonb) as x(
      item_id text, properties jsonb, consents jsonb, provenance text, first_visit timestamptz,
      last_visit timestamptz, nb_of_visits integer)
    where p.scope = ${scope} and p.item_id = x.item_id`;

  // Profiles sharing a mergeIdentifier become one; as in Apache Unomi, the profile created
  // first survives, whichever of them claimed the identifier last.
  for (const { profileId, mergeIdentifier } of mergeChecks) {
    const holders = await tx<{ item_id: string }[]>`
      select item_id from profiles
      where scope = ${scope} and properties ->> 'mergeIdentifier' = ${mergeIdentifier}
      order by created_at, item_id`;
    if (!holders.some((h) => h.item_id === profileId)) continue; // already merged this batch
    for (const holder of holders.slice(1)) {
      await mergeProfiles(tx, scope, holders[0]!.item_id, holder.item_id, now);
    }
  }
  for (const { profileId, otherId } of targetMerges) {
    await mergeProfiles(tx, scope, profileId, otherId, now);
  }
  return outcome;
}

/**
 * The profile ids of a pixel group that name a pixel profile, each now locked until the
 * transaction ends: a missing one is created as a pixel profile first, so none can be created
 * as a server profile, become `merged` or be merged away meanwhile. An id absorbed by a merge
 * (an alias) or naming a server or merged profile is left out: a pixel event, sent by an
 * unauthenticated browser, must never change an identified profile's history or visits.
 */
async function _lockPixelProfiles(
  tx: Tx,
  scope: string,
  rows: _EventRow[],
  now: Date,
): Promise<Set<string>> {
  const ids = [...new Set(rows.map((row) => row.profile_id))].sort();
  // In id order, as every path creates and locks profiles: no deadlock with another batch.
  const unaliased = await tx<{ id: string }[]>`
    with x as (
      select x.id from unnest(${ids}::text[]) as x(id)
      where not exists (
        select 1 from profile_aliases a where a.scope = ${scope} and a.alias_id = x.id)
    ), created as (
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      select ${scope}, x.id, jsonb_build_object('shopDomain', ${scope}::text), 'pixel', ${now},
             ${now}
      from x order by x.id
      on conflict (scope, item_id) do nothing
      returning item_id
    )
    select id from x`;
  if (unaliased.length === 0) return new Set();
  // A statement of its own: its snapshot sees the profiles the previous one created or found.
  const locked = await tx<{ item_id: string }[]>`
    select item_id from profiles
    where scope = ${scope} and item_id = any(${unaliased.map((r) => r.id)}::text[])
      and provenance = 'pixel'
    order by item_id
    for update`;
  return new Set(locked.map((r) => r.item_id));
}

/** True when an event changes more than a profile's visits: an update, a consent or a merge. */
function _needsProfileLogic(row: _EventRow, source: string): boolean {
  return row.event_type === "updateProperties" || row.event_type === "modifyConsent" ||
    (source === "server" && row.target?.itemType === "profile" &&
      row.target.itemId !== row.profile_id);
}

/**
 * The common batch (no updateProperties, no merge target) in one statement, with the same
 * effects and the same lock order as the general path (profiles in id order, then sessions), and
 * each profile and session written once: events are stored, aliases resolved, each profile is
 * upserted with its visit bounds and the sessions the statement's snapshot does not hold (which
 * locks it), then the sessions are upserted. The sessions' upsert says which really were new; a
 * second statement corrects the rare difference (another transaction stored one meanwhile) and
 * turns a pixel profile named by a server event into `merged`. The provenance each profile had
 * under its lock comes back from the first, so which event changed its profile is known exactly.
 */
async function _applyVisitsOnly(
  tx: Tx,
  group: _Group,
  rows: _EventRow[],
  now: Date,
): Promise<Map<string, boolean>> {
  const { scope, source } = group;
  const [result] = await tx<
    {
      fresh: string[] | null;
      aliased: { profile_id: string; master: string }[] | null;
      pixel: string[] | null;
      recount: { item_id: string; n: number }[] | null;
    }[]
  >`
    with x as (
      select * from jsonb_to_recordset(${jsonParam(tx, rows)}::jsonb) as x(
        id text, index integer, profile_id text, session_id text, event_type text,
        time_stamp timestamptz, properties jsonb, flattened_properties jsonb, target jsonb,
        received_at timestamptz, session_context jsonb)
    ), ins as (
      insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                          flattened_properties, target, source, received_at)
      select ${scope}, x.id, x.profile_id, x.session_id, x.event_type, x.time_stamp, x.properties,
             x.flattened_properties, x.target, ${source}, x.received_at
      from x
      on conflict (scope, id) do nothing
      returning id
    ), fresh as (
      select x.id, x.index, x.profile_id, x.session_id, x.time_stamp, x.session_context,
             coalesce(a.profile_id, x.profile_id) as master
      from ins join x on x.id = ins.id
      -- The batch's own ids keep the alias lookup on the primary key: joined on the scope alone,
      -- a planner on a young table's statistics read every alias of the brand instead.
      left join profile_aliases a on a.scope = ${scope} and a.alias_id = x.profile_id
        and a.alias_id = any(${[...new Set(rows.map((row) => row.profile_id))]}::text[])
    ), batch_sessions as (
      -- A session belongs to the profile of its earliest event, as in the general path. It is
      -- new unless the snapshot holds it: a scalar subquery is one primary-key probe per session
      -- whatever the plan (an \`exists\` or \`item_id = any(...)\` can be planned as a hash of
      -- every session of the brand, as a generic plan on young statistics did).
      select session_id as item_id, (array_agg(master order by time_stamp, index))[1] as profile_id,
             min(time_stamp) as first, max(time_stamp) as last, count(*)::int as n,
             (array_agg(session_context order by time_stamp, index)
               filter (where session_context is not null))[1] as properties,
             min(time_stamp) filter (where session_context is not null) as context_at,
             (select o.item_id from sessions o
              where o.scope = ${scope} and o.item_id = fresh.session_id) is null as new
      from fresh group by session_id
    ), prof as (
      insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                            nb_of_visits, created_at, updated_at)
      select ${scope}, f.master, jsonb_build_object('shopDomain', ${scope}::text), ${source},
             f.first, f.last, coalesce(v.n, 0), ${now}, ${now}
      from (select master, min(time_stamp) as first, max(time_stamp) as last
            from fresh group by master) f
      left join (select profile_id, count(*)::int as n from batch_sessions where new
                 group by profile_id) v on v.profile_id = f.master
      order by f.master
      on conflict (scope, item_id) do update
      set first_visit = least(profiles.first_visit, excluded.first_visit),
          last_visit = greatest(profiles.last_visit, excluded.last_visit),
          nb_of_visits = profiles.nb_of_visits + excluded.nb_of_visits,
          updated_at = excluded.updated_at
      returning item_id, (xmax = 0) as created, provenance
    ), sess as (
      insert into sessions (scope, item_id, profile_id, first_event_at, last_event_at,
                            event_count, properties, context_at)
      select ${scope}, s.item_id, s.profile_id, s.first, s.last, s.n,
             coalesce(s.properties, '{}'::jsonb), s.context_at
      from batch_sessions s
      -- Every profile is locked before the first session: the general path's order.
      where (select count(*) from prof) > 0
      order by s.item_id
      on conflict (scope, item_id) do update
      set ${_sessionMerge(tx)}
      returning item_id, (xmax = 0) as inserted
    )
    select (select array_agg(id) from fresh) as fresh,
           (select json_agg(distinct jsonb_build_object('profile_id', profile_id, 'master', master))
            from fresh where master <> profile_id) as aliased,
           (select array_agg(item_id) from prof where provenance = 'pixel' and not created)
             as pixel,
           -- Sessions counted as new that another transaction stored first (or the reverse).
           (select json_agg(json_build_object('item_id', m.profile_id, 'n', m.n))
            from (select b.profile_id, sum(s.inserted::int - b.new::int)::int as n
                  from sess s join batch_sessions b on b.item_id = s.item_id
                  group by b.profile_id) m
            where m.n <> 0) as recount`;
  const stored = new Set(result?.fresh ?? []);
  const outcome = new Map<string, boolean>();
  if (stored.size === 0) return outcome;
  const master = new Map((result?.aliased ?? []).map((a) => [a.profile_id, a.master]));
  // A server event naming a pixel profile links a server identity to it; the reverse is never
  // trusted (pixel events come from unauthenticated browsers).
  const flipped = new Set(source === "server" ? result?.pixel ?? [] : []);
  const recount = result?.recount ?? [];
  if (flipped.size > 0 || recount.length > 0) {
    await tx`
      with changes as (
        select coalesce(v.item_id, f.item_id) as item_id, coalesce(v.n, 0) as n,
               f.item_id is not null as flip
        from jsonb_to_recordset(${jsonParam(tx, recount)}::jsonb) as v(item_id text, n integer)
        full join unnest(${[...flipped]}::text[]) as f(item_id) on f.item_id = v.item_id
      )
      update profiles p
      set nb_of_visits = p.nb_of_visits + c.n,
          provenance = case when c.flip then 'merged' else p.provenance end
      from changes c
      where p.scope = ${scope} and p.item_id = c.item_id`;
  }
  const fresh = rows.filter((row) => stored.has(row.id))
    .sort((a, b) => a.time_stamp.localeCompare(b.time_stamp) || a.index - b.index);
  const changedOnce = new Set<string>();
  for (const row of fresh) {
    const profileId = master.get(row.profile_id) ?? row.profile_id;
    // The first stored event of a flipped profile is the one that changed it.
    const changed = flipped.has(profileId) && !changedOnce.has(profileId);
    if (changed) changedOnce.add(profileId);
    outcome.set(row.id, changed);
  }
  return outcome;
}

interface _SessionRow {
  item_id: string;
  profile_id: string;
  first: string;
  last: string;
  count: number;
  properties: SessionProperties | null;
  context_at: string | null;
}

/**
 * A stored session's upsert by a batch's: the span widens, the count adds up, and the properties
 * are those of the earliest event with a context, whichever batch brought it (on a tie of times,
 * the stored ones stay).
 */
function _sessionMerge(tx: Tx) {
  return tx`first_event_at = least(sessions.first_event_at, excluded.first_event_at),
    last_event_at = greatest(sessions.last_event_at, excluded.last_event_at),
    event_count = sessions.event_count + excluded.event_count,
    properties = case when excluded.context_at < coalesce(sessions.context_at, 'infinity')
                      then excluded.properties else sessions.properties end,
    context_at = least(sessions.context_at, excluded.context_at)`;
}

/**
 * The batch's sessions: one row per session id, with its span, event count and the properties
 * of its earliest event with a context (`fresh` is in time order).
 */
function _sessionRows(fresh: _EventRow[], master: Map<string, string>): _SessionRow[] {
  const sessions = new Map<string, _SessionRow>();
  for (const row of fresh) {
    let session = sessions.get(row.session_id);
    if (!session) {
      session = {
        item_id: row.session_id,
        profile_id: master.get(row.profile_id)!,
        first: row.time_stamp,
        last: row.time_stamp,
        count: 0,
        properties: null,
        context_at: null,
      };
      sessions.set(row.session_id, session);
    }
    if (row.time_stamp < session.first) session.first = row.time_stamp;
    if (row.time_stamp > session.last) session.last = row.time_stamp;
    session.count++;
    if (row.session_context && session.context_at === null) {
      session.properties = row.session_context;
      session.context_at = row.time_stamp;
    }
  }
  return [...sessions.values()];
}

/** Maps each id to the profile it belongs to now (itself unless merged away). */
async function _resolveAliases(
  tx: Tx,
  scope: string,
  ids: string[],
): Promise<Map<string, string>> {
  const aliases = await tx<{ alias_id: string; profile_id: string }[]>`
    select alias_id, profile_id from profile_aliases
    where scope = ${scope} and alias_id = any(${ids}::text[])`;
  const master = new Map(ids.map((id) => [id, id]));
  for (const alias of aliases) master.set(alias.alias_id, alias.profile_id);
  return master;
}

/** Upserts the batch's sessions; returns how many new sessions (visits) each profile gained. */
async function _upsertSessions(
  tx: Tx,
  scope: string,
  fresh: _EventRow[],
  master: Map<string, string>,
): Promise<Map<string, number>> {
  const sessions = _sessionRows(fresh, master);
  const upserted = await tx<{ profile_id: string; inserted: boolean }[]>`
    insert into sessions (scope, item_id, profile_id, first_event_at, last_event_at, event_count,
                          properties, context_at)
    select ${scope}, x.item_id, x.profile_id, x.first, x.last, x.count,
           coalesce(x.properties, '{}'::jsonb), x.context_at
    from jsonb_to_recordset(${jsonParam(tx, sessions)}::jsonb) as x(
      item_id text, profile_id text, first timestamptz, last timestamptz, count integer,
      properties jsonb, context_at timestamptz)
    on conflict (scope, item_id) do update
    set ${_sessionMerge(tx)}
    returning profile_id, (xmax = 0) as inserted`;
  const visits = new Map<string, number>();
  for (const row of upserted) {
    if (row.inserted) visits.set(row.profile_id, (visits.get(row.profile_id) ?? 0) + 1);
  }
  return visits;
}

/**
 * Merges profile `from` into profile `into` (after resolving both through aliases): `into`
 * survives as a `merged` profile, its properties win and `from`'s fill the gaps, visits add up.
 * The absorbed id and every id it had absorbed stay readable through profile_aliases, and both
 * histories stay attached. Returns the survivor's id, or null when either profile is missing.
 */
export async function mergeProfiles(
  tx: Tx,
  scope: string,
  into: string,
  from: string,
  now: Date,
): Promise<string | null> {
  const resolved = await _resolveAliases(tx, scope, [into, from]);
  const [keepId, absorbId] = [resolved.get(into)!, resolved.get(from)!];
  if (keepId === absorbId) return keepId;
  const rows = new Map(
    (await tx<_ProfileRow[]>`
      select item_id, properties, consents, provenance, first_visit, last_visit, nb_of_visits,
             created_at
      from profiles where scope = ${scope} and item_id in (${keepId}, ${absorbId})
      order by item_id for update`).map((row) => [row.item_id, row]),
  );
  const keep = rows.get(keepId);
  const absorb = rows.get(absorbId);
  if (!keep || !absorb) return null;
  const firstVisit = [keep.first_visit, absorb.first_visit].filter((d): d is Date => d !== null)
    .sort((x, y) => x.getTime() - y.getTime())[0] ?? null;
  const lastVisit = [keep.last_visit, absorb.last_visit].filter((d): d is Date => d !== null)
    .sort((x, y) => y.getTime() - x.getTime())[0] ?? null;
  await tx`
    update profiles
    set properties = ${jsonParam(tx, { ...absorb.properties, ...keep.properties })}::jsonb,
        consents = ${jsonParam(tx, mergeConsents(keep.consents, absorb.consents))}::jsonb,
        provenance = 'merged', first_visit = ${firstVisit}, last_visit = ${lastVisit},
        nb_of_visits = ${keep.nb_of_visits + absorb.nb_of_visits}, updated_at = ${now}
    where scope = ${scope} and item_id = ${keep.item_id}`;
  await tx`delete from profiles where scope = ${scope} and item_id = ${absorb.item_id}`;
  await tx`
    update profile_aliases set profile_id = ${keep.item_id}
    where scope = ${scope} and profile_id = ${absorb.item_id}`;
  await tx`
    insert into profile_aliases (scope, alias_id, profile_id, merged_at)
    values (${scope}, ${absorb.item_id}, ${keep.item_id}, ${now})
    on conflict (scope, alias_id) do update set profile_id = excluded.profile_id`;
  await tx`
    update sessions set profile_id = ${keep.item_id}
    where scope = ${scope} and profile_id = ${absorb.item_id}`;
  return keep.item_id;
}
