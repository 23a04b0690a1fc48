/**
 * The membership feed's write side: appending who entered or left a segment to
 * `segment_changes` and applying it to `segment_members`, in the caller's transaction. Every
 * writer of a scope's membership takes the scope's lock first, so the feed's `seq` order is its
 * commit order within a scope: a consumer resuming after a seq never misses a change committed
 * later with a smaller seq.
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

/**
 * Takes the scope's membership lock for the rest of `tx`; a writer reads the current membership
 * only after it, so two writers never both record the same entry.
 */
export async function lockMembership(tx: Tx, scope: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(${MEMBERSHIP_LOCK}, hashtext(${scope}))`;
}

/**
 * Appends `changes` (in their order) to the feed and applies them to the members table, in
 * `tx` under the scope's membership lock; `newId` gives each change its public id (a ULID).
 * A call holds at most one change per segment and profile (a diff).
 */
export async function appendChanges(
  tx: Tx,
  scope: string,
  changes: readonly MembershipChange[],
  newId: () => string,
): Promise<void> {
  if (changes.length === 0) return;
  const ids = changes.map(() => newId());
  const segments = changes.map((c) => c.segmentId);
  const profiles = changes.map((c) => c.profileId);
  const kinds = changes.map((c) => c.change);
  const ats = changes.map((c) => c.at.toISOString());
  // Sent together (pipelined): the write still runs after the lock is held, one round trip
  // fewer. One statement for the feed and both sides of the members: the diff crosses the wire
  // once. Under the lock an entering profile is never a member yet, so no upsert is needed.
  await Promise.all([
    lockMembership(tx, scope),
    tx`
      with c as materialized (
        select * from unnest(${ids}::text[], ${segments}::text[], ${profiles}::text[],
                             ${kinds}::text[], ${ats}::timestamptz[]) with ordinality
          as c(id, segment_id, profile_id, change, at, n)),
      logged as (
        insert into segment_changes (id, scope, segment_id, profile_id, change, at)
        select c.id, ${scope}, c.segment_id, c.profile_id, c.change, c.at from c order by c.n),
      left_segments as (
        delete from segment_members m using c
        where c.change = 'exited' and m.scope = ${scope} and m.segment_id = c.segment_id
          and m.profile_id = c.profile_id)
      insert into segment_members (scope, segment_id, profile_id, entered_at)
      select ${scope}, c.segment_id, c.profile_id, c.at from c where c.change = 'entered'
      on conflict (scope, segment_id, profile_id) do nothing`,
  ]);
}
