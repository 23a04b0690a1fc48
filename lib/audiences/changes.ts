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
import type { Tx } from "../store/db.ts";

/** One profile entering or leaving one segment. */
export interface MembershipChange {
  segmentId: string;
  profileId: string;
  change: "entered" | "exited";
  at: Date;
}

/** First key of the two-key advisory lock serializing one scope's membership writers. */
export const MEMBERSHIP_LOCK = 0x5e6_ae;

/** Profiles one feed row holds at most (fewer than the 1,024 positions of a row). */
export const FEED_ROW_ENTRIES = 1_000;

/**
 * Takes the scope's membership lock for the rest of `tx`; a writer reads the current membership
 * only after it, so two writers never both record the same entry.
 */
export async function lockMembership(tx: Tx, scope: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(${MEMBERSHIP_LOCK}, hashtext(${scope}))`;
}

/**
 * Appends `changes` to the feed (grouped by segment, change and time, in the order of each
 * group's first change) and applies them to the profiles' memberships, in `tx` under the scope's
 * membership lock. A call holds at most one change per segment and profile (a diff).
 */
export async function appendChanges(
  tx: Tx,
  scope: string,
  changes: readonly MembershipChange[],
): Promise<void> {
  if (changes.length === 0) return;
  const segments = changes.map((c) => c.segmentId);
  const profiles = changes.map((c) => c.profileId);
  const kinds = changes.map((c) => c.change);
  const ats = changes.map((c) => c.at.toISOString());
  // Sent together (pipelined): the write still runs after the lock is held, one round trip
  // fewer. One statement for the feed and the memberships: the diff crosses the wire once, and
  // under the lock the memberships it reads are the latest.
  await Promise.all([
    lockMembership(tx, scope),
    tx`
      with c as materialized (
        select * from unnest(${segments}::text[], ${profiles}::text[], ${kinds}::text[],
                             ${ats}::text[]) with ordinality as c(segment_id, profile_id, change, at, n)),
      grouped as (
        select c.*, (row_number() over (partition by segment_id, change, at order by n) - 1)
                      / ${FEED_ROW_ENTRIES} as chunk
        from c),
      logged as (
        insert into segment_feed (scope, segment_id, change, at, profile_ids)
        select ${scope}, segment_id, change, at::timestamptz, array_agg(profile_id order by n)
        from grouped group by segment_id, change, at, chunk order by min(n)),
      diff as (
        select profile_id,
               coalesce(jsonb_object_agg(segment_id, at) filter (where change = 'entered'),
                        '{}') as added,
               coalesce(array_agg(segment_id) filter (where change = 'exited'), '{}') as removed
        from c group by profile_id),
      merged as (
        select d.profile_id, (coalesce(p.segments, '{}') - d.removed) || d.added as segments
        from diff d left join profile_segments p
          on p.scope = ${scope} and p.profile_id = d.profile_id),
      emptied as (
        delete from profile_segments p using merged m
        where p.scope = ${scope} and p.profile_id = m.profile_id and m.segments = '{}')
      insert into profile_segments (scope, profile_id, segments)
      select ${scope}, profile_id, segments from merged where segments <> '{}'
      on conflict (scope, profile_id) do update set segments = excluded.segments`,
  ]);
}
