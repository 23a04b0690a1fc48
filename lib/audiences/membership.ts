/**
 * Segment membership as state: who is in each segment since when, kept by writing only what
 * changed. Three writers, each one transaction under the scope's membership lock (changes.ts),
 * each reading the current members after taking it, so the last to run decides on the latest
 * committed data: the touched profiles of an applied group against every segment of the brand
 * ({@linkcode updateMembership}), one segment over the whole brand ({@linkcode refreshSegment}),
 * erased profiles ({@linkcode exitProfiles}). Re-running any of them on unchanged data writes
 * nothing, so a redelivered message changes nothing twice.
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import { storedCondition } from "../engine/caller_condition.ts";
import { compileCondition, type Condition } from "../engine/conditions.ts";
import {
  compileSegments,
  type ReadBudget,
  scopeSegments,
  segmentArms,
  segmentsOfProfiles,
  type StoredSegment,
  withinBudget,
} from "../engine/segments.ts";
import { databaseFailure, type Sql, type Tx } from "../store/db.ts";
import {
  appendChanges,
  type ChangeCounts,
  lockMembership,
  type MembershipChange,
  writeDecided,
} from "./changes.ts";

/** What membership maintenance needs. */
export interface MembershipDeps {
  sql: Sql;
  now: () => Date;
  /**
   * The brand's share and time budget for evaluating its conditions: the touched profiles of a
   * group are evaluated within it.
   */
  budget: (scope: string) => ReadBudget;
  /** How long one segment's evaluation over the whole brand may take (a refresh, the sweep). */
  refreshTimeoutMs: number;
}

/**
 * Re-evaluates `profileIds` (with the profiles they were merged into, and the ids merged into
 * those) against every segment of the scope in one statement, and writes the difference with
 * their current memberships: a profile that no longer exists leaves every segment, and a
 * membership of a segment that no longer exists ends. A segment not decided within the budget
 * keeps its members as they were. Answers how many entered and exited.
 *
 * The evaluation and the write are one statement ({@linkcode writeDecided}), so the decisions
 * never travel to the service and back, within half the brand's time budget. Should it fail (a
 * segment past the budget or failing on the data), the update is made in steps within what
 * remains ({@linkcode _inSteps}): the segments decided before the failing one are written, and
 * the failing one keeps its members.
 */
export async function updateMembership(
  deps: MembershipDeps,
  scope: string,
  profileIds: readonly string[],
): Promise<ChangeCounts> {
  if (profileIds.length === 0) return { entered: 0, exited: 0 };
  return await deps.sql.begin(async (tx) => {
    // Sent together (pipelined), one round trip: the read runs after the lock is held.
    const [, segments] = await Promise.all([
      lockMembership(tx, scope),
      scopeSegments(tx, scope),
    ]);
    const read = { segments, now: deps.now() };
    const budget = deps.budget(scope);
    const clock = budget.clock ?? (() => performance.now());
    const deadline = clock() + budget.timeoutMs;
    const written = await _inOneStatement(deps.sql, tx, scope, profileIds, read, budget);
    if (written) return written;
    const remaining = { ...budget, timeoutMs: Math.max(0, Math.floor(deadline - clock())) };
    return await _inSteps({ ...deps, budget: () => remaining }, tx, scope, profileIds, read);
  }) as ChangeCounts;
}

/** What an update read under the lock: the scope's segments, and the time it decides at. */
interface UpdateRead {
  segments: readonly StoredSegment[];
  now: Date;
}

/**
 * {@linkcode updateMembership} as one statement on a permit of the brand's share, within half
 * its time budget; null when no permit is free or the statement failed (rolled back to its
 * savepoint). Only a database outage is thrown.
 */
async function _inOneStatement(
  sql: Sql,
  tx: Tx,
  scope: string,
  profileIds: readonly string[],
  read: UpdateRead,
  budget: ReadBudget,
): Promise<ChangeCounts | null> {
  const release = budget.permit();
  if (!release) return null;
  try {
    const { arms, unparsed } = compileSegments(sql, scope, read.segments, read.now);
    // The savepoint's `sql`: the statement runs in it.
    const write = (sp: Sql) =>
      writeDecided(sp as unknown as Tx, scope, {
        decided: sp`
          ${_withMergedIds(sp, scope, profileIds)},
          targets as materialized (
            select * from profiles
            where scope = ${scope} and item_id = any(array(select id from all_ids))),
          decided as (${segmentArms(sp, arms)})`,
        segmentIds: arms.map((arm) => arm.id),
        keep: unparsed,
        at: read.now,
      });
    return await withinBudget(sql, tx, Math.floor(budget.timeoutMs / 2), write);
  } catch (err) {
    const failure = databaseFailure(err instanceof DomainError ? err.cause : err);
    if (failure === "unreachable" || failure === "lost") throw err;
    return null;
  } finally {
    release();
  }
}

/**
 * {@linkcode updateMembership} in steps, under the lock already taken: the memberships read,
 * the segments evaluated (those decided before a failing one stay decided), the diff written.
 */
async function _inSteps(
  deps: MembershipDeps,
  tx: Tx,
  scope: string,
  profileIds: readonly string[],
  read: UpdateRead,
): Promise<ChangeCounts> {
  const { now } = read;
  const rows = await _withMerged(tx, scope, profileIds);
  const ids = rows.map((row) => row.id);
  const held = new Map(rows.map((row) => [row.id, new Set(row.held)]));
  const decided = await segmentsOfProfiles(deps.sql, scope, ids, now, deps.budget(scope), {
    within: tx,
    segments: read.segments,
  });
  const changes: MembershipChange[] = [];
  for (const profileId of ids) {
    const { member, unknown } = decided.get(profileId)!;
    const before = held.get(profileId) ?? new Set<string>();
    for (const segmentId of member) {
      if (!before.has(segmentId)) {
        changes.push({ segmentId, profileId, change: "entered", at: now });
      }
    }
    const skip = new Set([...member, ...unknown]);
    for (const segmentId of before) {
      if (!skip.has(segmentId)) changes.push({ segmentId, profileId, change: "exited", at: now });
    }
  }
  await appendChanges(tx, scope, changes);
  return _counts(changes);
}

/** How many of `changes` are entries and how many exits. */
function _counts(changes: readonly MembershipChange[]): ChangeCounts {
  const entered = changes.filter((c) => c.change === "entered").length;
  return { entered, exited: changes.length - entered };
}

/**
 * Common table expressions ending with `all_ids (id)`: the ids asked for, the profiles they were
 * merged into, and every id merged into those that still holds memberships (a merge deletes the
 * absorbed profile, whose memberships end with it).
 */
function _withMergedIds(tx: Sql | Tx, scope: string, ids: readonly string[]) {
  return tx`
    given as (select distinct x.id from unnest(${[...ids]}::text[]) as x(id)),
    roots as (
      select id from given
      union
      select a.profile_id from profile_aliases a join given g on a.alias_id = g.id
      where a.scope = ${scope}),
    all_ids as (
      select id from roots
      union
      select a.alias_id from profile_aliases a join roots r on a.profile_id = r.id
      where a.scope = ${scope}
        and exists (select 1 from profile_segments m
                    where m.scope = ${scope} and m.profile_id = a.alias_id))`;
}

/** The ids of {@linkcode _withMergedIds} in id order, each with the segments it is a member of. */
async function _withMerged(
  tx: Tx,
  scope: string,
  ids: readonly string[],
): Promise<{ id: string; held: string[] }[]> {
  const rows = await tx<{ id: string; held: string[] }[]>`
    with ${_withMergedIds(tx, scope, ids)}
    select i.id, array(select jsonb_object_keys(m.segments) from profile_segments m
                       where m.scope = ${scope} and m.profile_id = i.id) as held
    from all_ids i`;
  return rows.sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * Evaluates one segment over the whole brand and writes the difference with its members; a
 * segment that no longer exists (or whose stored condition no longer parses) has every member
 * exit. Runs on a permit of the brand's share (none free: `unavailable`, the job is retried)
 * and within `refreshTimeoutMs`. Answers how many entered and exited.
 */
export async function refreshSegment(
  deps: MembershipDeps,
  scope: string,
  segmentId: string,
): Promise<ChangeCounts> {
  const release = deps.budget(scope).permit();
  if (!release) {
    throw new DomainError("unavailable", `the brand's share of the database is taken: ${scope}`);
  }
  try {
    return await deps.sql.begin(async (tx) => {
      await lockMembership(tx, scope);
      const now = deps.now();
      await tx`select set_config('statement_timeout', ${String(deps.refreshTimeoutMs)}, true)`;
      const [segment] = await tx<{ condition: Condition }[]>`
        select condition from segments where scope = ${scope} and id = ${segmentId}`;
      const holds = segment ? _compiled(tx, segment.condition, scope, now) : null;
      const rows = await tx<{ change: "entered" | "exited"; profile_id: string }[]>`
        ${
        holds
          ? tx`
        select 'entered' as change, p.item_id as profile_id from profiles p
        where p.scope = ${scope} and ${holds()}
          and not exists (select 1 from profile_segments m
                          where m.scope = ${scope} and m.profile_id = p.item_id
                            and m.segments ? ${segmentId})
        union all`
          : tx``
      }
        select 'exited' as change, m.profile_id from profile_segments m
        where m.scope = ${scope} and m.segments ? ${segmentId}
          ${
        holds
          ? tx`and not exists (select 1 from profiles p
                               where p.scope = ${scope} and p.item_id = m.profile_id
                                 and ${holds()})`
          : tx``
      }
        order by 2`;
      const changes = rows.map((row): MembershipChange => ({
        segmentId,
        profileId: row.profile_id,
        change: row.change,
        at: now,
      }));
      await appendChanges(tx, scope, changes);
      return _counts(changes);
    }) as ChangeCounts;
  } finally {
    release();
  }
}

/** A stored condition compiled over the whole brand, or null when it no longer parses. */
function _compiled(tx: Tx, condition: Condition, scope: string, now: Date) {
  let tree;
  try {
    tree = storedCondition(condition, now).tree;
  } catch (err) {
    if (!(err instanceof DomainError) || err.kind !== "invalid_condition") throw err;
    return null;
  }
  const sql = tx as unknown as Sql;
  // A fragment per use: each interpolation carries its own parameters.
  return () => compileCondition(sql, tree, { itemType: "profile", scope });
}

/**
 * Erased profiles leave every segment they are in (an `exited` change each), in the caller's
 * transaction: call it in the transaction that erases them.
 */
export async function exitProfiles(
  tx: Tx,
  input: { scope: string; profileIds: readonly string[]; now: Date },
): Promise<number> {
  if (input.profileIds.length === 0) return 0;
  await lockMembership(tx, input.scope);
  const rows = await tx<{ segment_id: string; profile_id: string }[]>`
    select s.segment_id, m.profile_id from profile_segments m
    cross join lateral jsonb_object_keys(m.segments) as s(segment_id)
    where m.scope = ${input.scope} and m.profile_id = any(${[...input.profileIds]}::text[])
    order by m.profile_id, s.segment_id`;
  await appendChanges(
    tx,
    input.scope,
    rows.map((row) => ({
      segmentId: row.segment_id,
      profileId: row.profile_id,
      change: "exited" as const,
      at: input.now,
    })),
  );
  return rows.length;
}
