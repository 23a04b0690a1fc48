/**
 * The membership feed's write side: appending who entered or left a segment to `segment_feed`
 * and applying it to `profile_segments`, in the caller's transaction. Every writer of a scope's
 * membership takes the scope's lock first, so the feed's positions grow in commit order within a
 * scope: a consumer resuming after a position never misses a change committed later with a
 * smaller one.
 *
 * Both tables are compact (migration 28): a feed row holds one segment's entries (or exits) of
 * one write, up to {@linkcode FEED_ROW_ENTRIES} profiles, and a profile's memberships are one
 * row. A change's position is its row's seq times 1,024 plus its index in the row, and its public
 * id is derived from the position (`segment_changes`, a view, shows one row per change).
 *
 * @module
 */
import { jsonParam, type Tx } from "../store/db.ts";

/** One profile entering or leaving one segment. */
export interface MembershipChange {
  segmentId: string;
  profileId: string;
  change: "entered" | "exited";
  at: Date;
}

/** First key of the two-key advisory lock serializing one scope's membership writers. */
export const MEMBERSHIP_LOCK = 0x5e6_ae;

/** Positions per feed row: a change's position is its row's seq times this plus its index. */
export const FEED_ROW_SPAN = 1_024;

/** Profiles one feed row holds at most (fewer than the {@linkcode FEED_ROW_SPAN} positions). */
export const FEED_ROW_ENTRIES = 1_000;

/**
 * Takes the scope's membership lock for the rest of `tx`; a writer reads the current membership
 * only after it, so two writers never both record the same entry.
 */
export async function lockMembership(tx: Tx, scope: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(${MEMBERSHIP_LOCK}, hashtext(${scope}))`;
}

/**
 * Appends `changes` to the feed (a row per segment, change and time, in the order of each
 * one's first change) and applies them to the profiles' memberships, in `tx` under the scope's
 * membership lock. A call holds at most one change per segment and profile (a diff).
 */
export async function appendChanges(
  tx: Tx,
  scope: string,
  changes: readonly MembershipChange[],
): Promise<void> {
  if (changes.length === 0) return;
  // Grouped here rather than in SQL: sorting thousands of text keys in the database costs more
  // than the writes themselves.
  const rows = new Map<string, { s: string; c: string; a: string; p: string[] }[]>();
  const profiles = new Map<string, { p: string; add: Record<string, string>; del: string[] }>();
  for (const change of changes) {
    const at = change.at.toISOString();
    const key = `${change.segmentId}\n${change.change}\n${at}`;
    let chunks = rows.get(key);
    if (!chunks) rows.set(key, chunks = []);
    let row = chunks.at(-1);
    if (!row || row.p.length === FEED_ROW_ENTRIES) {
      chunks.push(row = { s: change.segmentId, c: change.change, a: at, p: [] });
    }
    row.p.push(change.profileId);
    let profile = profiles.get(change.profileId);
    if (!profile) {
      profiles.set(change.profileId, profile = { p: change.profileId, add: {}, del: [] });
    }
    if (change.change === "entered") profile.add[change.segmentId] = at;
    else profile.del.push(change.segmentId);
  }
  // Sent together (pipelined): the write still runs after the lock is held, one round trip
  // fewer. One statement for the feed and the memberships, each profile's row found by its key
  // (never a scan of the scope's rows); under the lock it is the latest.
  await Promise.all([
    lockMembership(tx, scope),
    tx`
      with logged as (
        insert into segment_feed (scope, segment_id, change, at, profile_ids)
        select ${scope}, r.s, r.c, r.a, r.p
        from rows from (jsonb_to_recordset(${jsonParam(tx, [...rows.values()].flat())}::jsonb)
                          as (s text, c text, a timestamptz, p text[]))
          with ordinality as r(s, c, a, p, n)
        order by r.n),
      merged as (
        select d.p, (coalesce((select m.segments from profile_segments m
                               where m.scope = ${scope} and m.profile_id = d.p), '{}')
                     - d.del) || d.add as segments
        from jsonb_to_recordset(${jsonParam(tx, [...profiles.values()])}::jsonb)
          as d(p text, add jsonb, del text[])),
      emptied as (
        delete from profile_segments
        where scope = ${scope}
          and profile_id = any(array(select p from merged where segments = '{}')))
      insert into profile_segments (scope, profile_id, segments)
      select ${scope}, p, segments from merged where segments <> '{}'
      on conflict (scope, profile_id) do update set segments = excluded.segments`,
  ]);
}
