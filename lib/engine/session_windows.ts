/**
 * The session of an event sent without a session id: a profile's events with gaps under 30
 * minutes are one session. Applied inside the batch's transaction, under a lock per profile, so
 * two batches of one profile decide in turn; the rule and its edge cases are in
 * docs/integrations.md ("Sessions").
 *
 * @module
 */
import { jsonParam, type Tx } from "../store/db.ts";

/** Two events of a profile this far apart or more are in different sessions. */
export const SESSION_GAP_MS = 30 * 60_000;

const _EARLIEST = Date.parse("0001-01-01T00:00:00.000Z");
const _LATEST = Date.parse("9999-12-31T23:59:59.999Z");

/** An event that needs a session: its key in the batch, its (alias-resolved) profile and time. */
export interface SessionlessEvent {
  key: number;
  profileId: string;
  /** Epoch milliseconds. */
  time: number;
}

/** A stored session of a profile: its id and span (epoch milliseconds). */
export interface KnownSession {
  itemId: string;
  profileId: string;
  first: number;
  last: number;
}

/**
 * The generated id of a session that begins with an event at `time` (epoch milliseconds).
 * ':' is refused in caller-supplied ids, so a generated id never collides with one.
 */
export function generatedSessionId(profileId: string, time: number): string {
  return `${profileId}:${new Date(time).toISOString()}`;
}

/**
 * Assigns each event a session id, deterministically whatever the events' order: each
 * profile's events, in time order, form runs with gaps under {@linkcode SESSION_GAP_MS}; a run
 * joins the known session of its profile nearest to it (the earlier one on a tie) when the gap
 * between them is under the limit too, which stretches that session's span for the runs after
 * it, else it is a new session named by its first event. Two known sessions are never merged,
 * even when a run falls between them within the limit of both.
 */
export function assignSessions(
  events: readonly SessionlessEvent[],
  known: readonly KnownSession[],
): Map<number, string> {
  const byProfile = new Map<string, SessionlessEvent[]>();
  for (const event of events) {
    const list = byProfile.get(event.profileId);
    if (list) list.push(event);
    else byProfile.set(event.profileId, [event]);
  }
  const sessionsOf = new Map<string, KnownSession[]>();
  for (const session of known) {
    const list = sessionsOf.get(session.profileId);
    const copy = { ...session };
    if (list) list.push(copy);
    else sessionsOf.set(session.profileId, [copy]);
  }
  const assigned = new Map<number, string>();
  for (const [profileId, list] of byProfile) {
    list.sort((a, b) => a.time - b.time || a.key - b.key);
    const sessions = (sessionsOf.get(profileId) ?? [])
      .sort((a, b) => a.first - b.first || a.itemId.localeCompare(b.itemId));
    let start = 0;
    for (let i = 1; i <= list.length; i++) {
      if (i < list.length && list[i]!.time - list[i - 1]!.time < SESSION_GAP_MS) continue;
      const run = list.slice(start, i);
      start = i;
      const first = run[0]!.time;
      const last = run[run.length - 1]!.time;
      let best: KnownSession | undefined;
      let bestGap = Infinity;
      for (const session of sessions) {
        const gap = Math.max(0, first - session.last, session.first - last);
        if (gap < SESSION_GAP_MS && gap < bestGap) {
          best = session;
          bestGap = gap;
        }
      }
      if (!best) {
        best = { itemId: generatedSessionId(profileId, first), profileId, first, last };
        sessions.push(best);
      }
      best.first = Math.min(best.first, first);
      best.last = Math.max(best.last, last);
      for (const event of run) assigned.set(event.key, best.itemId);
    }
  }
  return assigned;
}

/**
 * Gives every row without a caller's session id (`own_session` false) its session (sets
 * `session_id`; again on every attempt of the batch's transaction), inside the
 * transaction: the rows' profiles are resolved through their aliases and locked (an advisory
 * lock per profile, taken in one order, before any row lock of the batch), then their generated
 * sessions within the gap of the rows' times are read and {@linkcode assignSessions} decides.
 */
export async function assignSessionIds(
  tx: Tx,
  scope: string,
  rows: { profile_id: string; time_stamp: string; session_id: string; own_session: boolean }[],
): Promise<void> {
  const open = rows.flatMap((row, key) => row.own_session ? [] : [{ row, key }]);
  if (open.length === 0) return;
  // An id PostgreSQL cannot hold as text (a NUL, a lone surrogate) is left to the events' insert,
  // which refuses its event alone with the message the caller then gets.
  const ids = [...new Set(open.map(({ row }) => row.profile_id))]
    .filter((id) => !id.includes("\u0000") && !/\p{Cs}/u.test(id));
  const resolved = await tx<{ id: string; master: string }[]>`
    with m as (
      select x.id, coalesce(a.profile_id, x.id) as master
      from unnest(${ids}::text[]) as x(id)
      left join profile_aliases a on a.scope = ${scope} and a.alias_id = x.id
    ), locks as (
      -- A volatile function in the target list runs after the sort: the locks are taken in one
      -- order by every batch, so two batches never wait on each other's.
      select pg_advisory_xact_lock(k)
      from (select distinct hashtextextended(${scope}::text || '/' || master, 0) as k from m) k
      order by k
    )
    select m.id, m.master from m where (select count(*) from locks) >= 0`;
  const master = new Map(resolved.map((r) => [r.id, r.master]));
  const events: SessionlessEvent[] = open.map(({ row, key }) => ({
    key,
    profileId: master.get(row.profile_id) ?? row.profile_id,
    time: Date.parse(row.time_stamp),
  }));
  const spans = new Map<string, { lo: number; hi: number }>();
  for (const event of events) {
    const span = spans.get(event.profileId);
    if (!span) spans.set(event.profileId, { lo: event.time, hi: event.time });
    else {
      span.lo = Math.min(span.lo, event.time);
      span.hi = Math.max(span.hi, event.time);
    }
  }
  // Within the years PostgreSQL stores: an event outside them is refused by the insert alone.
  const windows = [...spans].flatMap(([profile_id, { lo, hi }]) => {
    const from = Math.max(lo - SESSION_GAP_MS, _EARLIEST);
    const to = Math.min(hi + SESSION_GAP_MS, _LATEST);
    if (!(from <= to)) return [];
    return [{ profile_id, lo: new Date(from).toISOString(), hi: new Date(to).toISOString() }];
  });
  // Only generated sessions (their ids hold ':'): a caller's session keeps its own bounds.
  const known = await tx<{ item_id: string; profile_id: string; first: Date; last: Date }[]>`
    select s.item_id, s.profile_id, s.first_event_at as first, s.last_event_at as last
    from jsonb_to_recordset(${jsonParam(tx, windows)}::jsonb)
      as w(profile_id text, lo timestamptz, hi timestamptz)
    join sessions s on s.scope = ${scope} and s.profile_id = w.profile_id
      and s.first_event_at < w.hi and s.last_event_at > w.lo
    where strpos(s.item_id, ':') > 0`;
  const assigned = assignSessions(
    events,
    known.map((s) => ({
      itemId: s.item_id,
      profileId: s.profile_id,
      first: s.first.getTime(),
      last: s.last.getTime(),
    })),
  );
  for (const { row, key } of open) row.session_id = assigned.get(key)!;
}
