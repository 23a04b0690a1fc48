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
import type { SqlFragment } from "../engine/conditions.ts";
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

/** How many profiles entered and exited segments in one write. */
export interface ChangeCounts {
  entered: number;
  exited: number;
}

/**
 * The difference between what was decided and the current memberships, appended to the feed and
 * applied to the memberships by one statement in `tx` under the scope's membership lock, as
 * {@linkcode appendChanges} would write it (a feed row per segment and change, exits first, its
 * profiles in id order) without the changes passing through the caller. `decided` is a list of
 * common table expressions defining `all_ids (id)`, the profiles decided, and `decided (k,
 * members)`, the members among them of the segment `segmentIds[k]`. A membership of a segment
 * not decided ends, unless the segment is in `keep`. Answers how many entered and exited.
 */
export async function writeDecided(
  tx: Tx,
  scope: string,
  input: { decided: SqlFragment; segmentIds: readonly string[]; keep: readonly string[]; at: Date },
): Promise<ChangeCounts> {
  // Each feed row's ids are sorted bytewise (`collate "C"`), which costs little beside the
  // database's collation; the order only has to be the same on every run.
  const [counts] = await tx<ChangeCounts[]>`
    with ${input.decided},
    current as materialized (
      select m.profile_id, m.segments from profile_segments m
      where m.scope = ${scope} and m.profile_id = any(array(select id from all_ids))),
    now_in as materialized (
      select (${[...input.segmentIds]}::text[])[d.k + 1] as segment_id, u.id as profile_id
      from decided d cross join lateral unnest(d.members) as u(id)),
    changed as materialized (
      select n.segment_id, n.profile_id, 'entered' as change from now_in n
      where not exists (select 1 from current c
                        where c.profile_id = n.profile_id and c.segments ? n.segment_id)
      union all
      select s.segment_id, c.profile_id, 'exited' from current c
      cross join lateral jsonb_object_keys(c.segments) as s(segment_id)
      where s.segment_id <> all(${[...input.keep]}::text[])
        and not exists (select 1 from now_in n
                        where n.profile_id = c.profile_id and n.segment_id = s.segment_id)),
    grouped as (
      select segment_id, change, array_agg(profile_id order by profile_id collate "C") as ids
      from changed group by segment_id, change),
    logged as (
      insert into segment_feed (scope, segment_id, change, at, profile_ids)
      select ${scope}, g.segment_id, g.change, ${input.at}, g.ids[i:i + ${FEED_ROW_ENTRIES - 1}]
      from grouped g
      cross join lateral generate_series(1, cardinality(g.ids), ${FEED_ROW_ENTRIES}) as i
      order by g.change desc, g.segment_id, i),
    per_profile as (
      select profile_id,
             coalesce(array_agg(segment_id) filter (where change = 'exited'), '{}') as del,
             coalesce(jsonb_object_agg(segment_id, ${input.at.toISOString()}::text)
                        filter (where change = 'entered'), '{}') as add
      from changed group by profile_id),
    merged as (
      select p.profile_id, (coalesce(m.segments, '{}') - p.del) || p.add as segments
      from per_profile p left join current m on m.profile_id = p.profile_id),
    emptied as (
      delete from profile_segments
      where scope = ${scope}
        and profile_id = any(array(select profile_id from merged where segments = '{}'))),
    written as (
      insert into profile_segments (scope, profile_id, segments)
      select ${scope}, profile_id, segments from merged where segments <> '{}'
      on conflict (scope, profile_id) do update set segments = excluded.segments)
    select count(*) filter (where change = 'entered')::int as entered,
           count(*) filter (where change = 'exited')::int as exited
    from changed`;
  return counts!;
}
