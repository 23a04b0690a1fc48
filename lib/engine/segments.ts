/**
 * Segments: storage of a brand's segments, their members (pages, counts, NDJSON export) and a
 * profile's memberships.
 *
 * @module
 */
import { databaseFailure, type Sql, type Tx } from "../store/db.ts";
import { DomainError } from "../errors.ts";
import { storedCondition } from "./caller_condition.ts";
import {
  compileCondition,
  type Condition,
  type ConditionCost,
  injectScopePredicate,
  type SqlFragment,
} from "./conditions.ts";
import {
  exportFieldsSql,
  exportLine,
  exportLineSql,
  exportPredictionsSql,
  type ExportRow,
} from "./export_lines.ts";
import { identityOf, type ProfileView, profileView } from "./profiles.ts";
import { evaluationError, withQueryBudget } from "./queries.ts";

/**
 * Segments one brand may define. The customer record evaluates all of them for its profile, and
 * the dashboard counts them, so their number bounds what one brand's reads can ask.
 */
export const MAX_SEGMENTS_PER_BRAND = 200;

/** Gives a heavy-read permit back; calling it again does nothing. */
export type ReadRelease = () => void;

/**
 * How a brand's condition-evaluating read may use the database: a permit of the brand's share of
 * the pool (null when the share is taken: the read is refused, never queued) and the time it may
 * take in all.
 */
export interface ReadBudget {
  permit(): ReadRelease | null;
  timeoutMs: number;
  /** Milliseconds of a monotonic clock (`performance.now` by default). */
  clock?: () => number;
}

/** A segment as stored: the caller's condition tree, its scope in the row's `scope` column. */
export interface Segment {
  id: string;
  name: string;
  description?: string;
  scope: string;
  /** The caller's tree, scope predicates stripped (segmentCondition, caller_condition.ts). */
  condition: Condition;
}

/**
 * A segment as the API and the dashboard show it: its condition with the brand's scope
 * predicate AND-injected in front, `and(properties.shopDomain equals <scope>, condition)`, so
 * that define → get → update round-trips (the predicate is stripped again on update).
 */
export function segmentView(segment: Segment): Segment {
  return { ...segment, condition: injectScopePredicate(segment.condition, segment.scope) };
}

interface _SegmentRow {
  id: string;
  name: string;
  description: string | null;
  condition: Condition;
}

/** The scope-namespaced id of a segment: `seg__<shop_domain>__<slug>`. */
export function segmentId(scope: string, keyOrName: string): string {
  const slug = keyOrName.normalize("NFKD").toLowerCase().replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "").slice(0, 64);
  if (!slug) throw new DomainError("invalid_input", "key or name must contain letters or digits");
  return `seg__${scope}__${slug}`;
}

/**
 * Stores a new segment; `conflict` when its id exists, `invalid_input` naming the limit when the
 * scope already has {@linkcode MAX_SEGMENTS_PER_BRAND}.
 */
export async function createSegment(
  sql: Sql,
  input: {
    scope: string;
    id: string;
    name: string;
    description?: string;
    condition: Condition;
    now: Date;
  },
): Promise<Segment> {
  const outcome = await _persisting(() =>
    sql.begin(async (tx) => {
      // Concurrent definitions of one scope take turns, so none slips past the cap.
      await tx`select pg_advisory_xact_lock(${_SEGMENTS_LOCK}, hashtext(${input.scope}))`;
      const [count] = await tx<{ n: number }[]>`
        select count(*)::int as n from segments where scope = ${input.scope}`;
      if (count!.n >= MAX_SEGMENTS_PER_BRAND) return "full" as const;
      const inserted = await tx`
        insert into segments (scope, id, name, description, condition, created_at, updated_at)
        values (${input.scope}, ${input.id}, ${input.name}, ${input.description ?? null},
                ${JSON.stringify(input.condition)}::text::json, ${input.now}, ${input.now})
        on conflict (scope, id) do nothing
        returning id`;
      return inserted.count === 0 ? "taken" as const : "stored" as const;
    })
  );
  if (outcome === "full") {
    throw new DomainError(
      "invalid_input",
      `a brand may define at most ${MAX_SEGMENTS_PER_BRAND} segments ` +
        "(MAX_SEGMENTS_PER_BRAND); update an existing segment with PUT instead",
    );
  }
  if (outcome === "taken") {
    throw new DomainError("conflict", `segment ${input.id} exists; update it with PUT`);
  }
  return _view(input.scope, { ...input, description: input.description ?? null });
}

/** A segment of the scope, or null (another brand's is null too). */
export async function getSegment(sql: Sql, scope: string, id: string): Promise<Segment | null> {
  const [row] = await sql<_SegmentRow[]>`
    select id, name, description, condition from segments where scope = ${scope} and id = ${id}`;
  return row ? _view(scope, row) : null;
}

/** The first key of the advisory lock that serializes one scope's segment definitions. */
const _SEGMENTS_LOCK = 0x5e6;

/** Updates a segment's condition (and name/description when given); null when absent. */
export async function updateSegment(
  sql: Sql,
  input: {
    scope: string;
    id: string;
    name?: string;
    description?: string;
    condition: Condition;
    now: Date;
  },
): Promise<Segment | null> {
  const [row] = await _persisting(() =>
    sql<_SegmentRow[]>`
    update segments
    set condition = ${JSON.stringify(input.condition)}::text::json,
        name = coalesce(${input.name ?? null}, name),
        description = coalesce(${input.description ?? null}, description),
        updated_at = ${input.now}
    where scope = ${input.scope} and id = ${input.id}
    returning id, name, description, condition`
  );
  return row ? _view(input.scope, row) : null;
}

/** A storage failure while writing a segment is `upstream_failed`: nothing was persisted. */
async function _persisting<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    throw new DomainError("upstream_failed", "the segment could not be persisted", { cause: err });
  }
}

/** A page of the scope's segments by id. */
export async function listSegments(
  sql: Sql,
  scope: string,
  page: { limit: number; offset: number },
): Promise<{ list: Segment[]; total: number }> {
  const rows = await sql<_SegmentRow[]>`
    select id, name, description, condition from segments where scope = ${scope}
    order by id limit ${page.limit} offset ${page.offset}`;
  const [count] = await sql<{ n: number }[]>`
    select count(*)::int as n from segments where scope = ${scope}`;
  return { list: rows.map((row) => _view(scope, row)), total: count!.n };
}

/**
 * Members of a segment in id order, at most `limit`, plus whether more remain: after `after`
 * (keyset; `offset` is then ignored) or from `offset`.
 */
export async function segmentMembers(
  sql: Sql,
  segment: Segment,
  page: { limit: number; offset?: number; after?: string; now: Date },
): Promise<{ list: ProfileView[]; more: boolean }> {
  const rows = await sql`
    select p.item_id, p.properties, p.provenance, p.first_visit, p.last_visit, p.nb_of_visits
    from profiles p
    where ${_members(sql, segment, page.now, page.after)}
    order by p.item_id
    limit ${page.limit + 1} offset ${page.after === undefined ? (page.offset ?? 0) : 0}`;
  return {
    list: rows.slice(0, page.limit).map((row) => profileView(row as never)),
    more: rows.length > page.limit,
  };
}

/** How many profiles a segment holds, counted up to `cap`. */
export async function countMembers(
  sql: Sql,
  segment: Segment,
  now: Date,
  cap: number,
): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from (
      select 1 from profiles p where ${_members(sql, segment, now)} limit ${cap}) capped`;
  return row!.n;
}

/** A page of a segment's members, with their identities and the member count (up to `cap`). */
export async function membersPage(
  sql: Sql,
  segment: Segment,
  page: { limit: number; offset: number; after?: string; now: Date; cap: number },
): Promise<{
  list: ProfileView[];
  more: boolean;
  totalSize: number;
  identities: Record<string, Record<string, unknown>>;
}> {
  const { list, more } = await segmentMembers(sql, segment, page);
  const totalSize = await countMembers(sql, segment, page.now, page.cap);
  const identities = Object.fromEntries(list.map((p) => [p.itemId, identityOf(p.properties)]));
  return { list, more, totalSize, identities };
}

/** A segment as evaluation reads it from storage. */
export interface StoredSegment {
  id: string;
  condition: Condition;
}

/**
 * The scope's segments in id order, as {@linkcode segmentsOfProfiles} evaluates them; sent when
 * awaited, so a caller can pipeline it with its own statements.
 */
export function scopeSegments(reader: Sql | Tx, scope: string): Promise<StoredSegment[]> {
  return reader<StoredSegment[]>`
    select id, condition from segments where scope = ${scope} order by id`;
}

/** A profile's segments: those it belongs to, and those that could not be decided. */
export interface Memberships {
  /** The ids of the segments the profile belongs to, in id order. */
  member: string[];
  /**
   * The ids of the segments not decided within the budget, in id order: past the time budget, a
   * failure of their condition, or the brand's heavy-read share taken.
   */
  unknown: string[];
}

/**
 * The scope's segments a profile belongs to: {@linkcode segmentsOfProfiles} for one profile (a
 * profile that does not exist belongs to nothing).
 */
export async function segmentsOfProfile(
  sql: Sql,
  scope: string,
  profileId: string,
  now: Date,
  budget: ReadBudget,
): Promise<Memberships> {
  const found = await segmentsOfProfiles(sql, scope, [profileId], now, budget);
  return found.get(profileId)!;
}

/** A segment compiled for evaluation over a statement's `targets` (the profiles decided). */
export interface SegmentArm {
  id: string;
  /** Holds for the profile `p`. */
  holds: SqlFragment;
  cost: number;
}

/**
 * The segments compiled for evaluation, cheapest first (no patterns or probes of other tables
 * before those with them, then by size and id), and the ids of those whose stored condition no
 * longer parses (written before a rule changed), which cannot be decided.
 */
export function compileSegments(
  sql: Sql,
  scope: string,
  segments: readonly StoredSegment[],
  now: Date,
): { arms: SegmentArm[]; unparsed: string[] } {
  const arms: SegmentArm[] = [];
  const unparsed: string[] = [];
  for (const segment of segments) {
    try {
      const parsed = storedCondition(segment.condition, now);
      const holds = compileCondition(sql, parsed.tree, {
        itemType: "profile",
        scope,
        single: true,
      });
      arms.push({ id: segment.id, holds, cost: _evaluationCost(parsed.cost) });
    } catch (err) {
      if (!(err instanceof DomainError) || err.kind !== "invalid_condition") throw err;
      unparsed.push(segment.id);
    }
  }
  arms.sort((a, b) => a.cost - b.cost || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { arms, unparsed };
}

/**
 * A query of one row per arm, `k` (its index) and `members` (the ids of the `targets` it holds
 * for), over a common table expression `targets` of the caller's. Arms run in order and each
 * row is an aggregate, sent once its segment is decided for every profile: rows taken as they
 * arrive stay decided when a later arm fails. No arms: no rows.
 */
export function segmentArms(tx: Sql, arms: readonly SegmentArm[]): SqlFragment {
  if (arms.length === 0) return tx`select null::int as k, null::text[] as members where false`;
  return arms.map((arm, k) =>
    tx`select ${k}::int as k,
         coalesce(array_agg(p.item_id) filter (where ${arm.holds}), '{}') as members
       from targets p`
  ).reduce((acc, arm) => tx`${acc} union all ${arm}`);
}

/**
 * The scope's segments each of `profileIds` belongs to, all segments evaluated for all the
 * profiles by one statement (a row per segment holding its members among them, read as it comes)
 * on one permit of the brand's share and within `budget.timeoutMs` in all. Segments without
 * patterns or probes of other tables go first, so a slow one leaves the cheap ones decided. A
 * segment whose stored condition no longer parses, or whose evaluation fails (a data error, the
 * time budget), is unknown for every profile, as are those after it in that statement; on a
 * failure the rest get another statement while budget remains, at most
 * {@linkcode _MEMBERSHIP_FAILURES} in all. Only a database outage is thrown. Every id asked for
 * has an entry; a profile that does not exist belongs to nothing. `within`: the statements run
 * in that transaction (each in a savepoint of its own, so a failed one leaves it usable), where
 * the caller writes what it decides (segment membership, lib/audiences). `segments`: the
 * scope's segments as {@linkcode scopeSegments} read them, when the caller read them already.
 */
export async function segmentsOfProfiles(
  sql: Sql,
  scope: string,
  profileIds: readonly string[],
  now: Date,
  budget: ReadBudget,
  options: { within?: Tx; segments?: readonly StoredSegment[] } = {},
): Promise<Map<string, Memberships>> {
  const { within } = options;
  const ids = [...new Set(profileIds)];
  const outcome = (member: (id: string) => string[], unknown: string[]) =>
    new Map(profileIds.map((id) => [id, { member: member(id), unknown }]));
  if (ids.length === 0) return new Map();
  const segments = options.segments ?? await scopeSegments(within ?? sql, scope);
  if (segments.length === 0) return outcome(() => [], []);
  const release = budget.permit();
  if (!release) return outcome(() => [], segments.map((s) => s.id));
  /** The members among `ids` of each decided segment. */
  const members = new Map<string, Set<string>>();
  const unknown = new Set<string>();
  try {
    const compiled = compileSegments(sql, scope, segments, now);
    const pending = compiled.arms;
    for (const id of compiled.unparsed) unknown.add(id);
    const clock = budget.clock ?? (() => performance.now());
    const deadline = clock() + budget.timeoutMs;
    let batch = pending.length;
    let failures = 0;
    while (pending.length > 0 && failures < _MEMBERSHIP_FAILURES) {
      const remaining = Math.floor(deadline - clock());
      if (remaining < 1) break;
      const arms = pending.slice(0, batch);
      const decided = new Map<number, string[]>();
      try {
        await withinBudget(sql, within, remaining, async (tx) => {
          await tx<{ k: number; members: string[] }[]>`
            with targets as materialized (
              select * from profiles where scope = ${scope} and item_id = any(${ids}::text[]))
            ${segmentArms(tx, arms)}`
            .forEach((row) => void decided.set(row.k, row.members));
        });
        arms.forEach((arm, k) => members.set(arm.id, new Set(decided.get(k) ?? [])));
        pending.splice(0, arms.length);
      } catch (err) {
        const cause = err instanceof DomainError ? err.cause : err;
        if ((cause as { code?: unknown })?.code === "MAX_PARAMETERS_EXCEEDED" && arms.length > 1) {
          // More bound values than one statement carries: fewer segments per statement.
          batch = Math.ceil(arms.length / 2);
          continue;
        }
        const failure = databaseFailure(cause);
        if (failure === "unreachable" || failure === "lost") throw err;
        failures += 1;
        // Arms run in order: the first without a row is the one that failed.
        let k = 0;
        while (decided.has(k)) {
          members.set(arms[k]!.id, new Set(decided.get(k)));
          k += 1;
        }
        if (k < arms.length) unknown.add(arms[k]!.id);
        pending.splice(0, Math.min(k + 1, arms.length));
      }
    }
    for (const left of pending) unknown.add(left.id);
  } finally {
    release();
  }
  const undecided = segments.filter((s) => unknown.has(s.id)).map((s) => s.id);
  return outcome(
    (id) => segments.filter((s) => members.get(s.id)?.has(id)).map((s) => s.id),
    undecided,
  );
}

/**
 * Runs `fn` bounded by `timeoutMs`: in a read-only transaction of its own
 * ({@linkcode withQueryBudget}), or in a savepoint of `within` whose statement timeout is put
 * back afterwards. `fn` sends its one statement before it first awaits.
 */
export async function withinBudget<T>(
  sql: Sql,
  within: Tx | undefined,
  timeoutMs: number,
  fn: (tx: Sql) => Promise<T>,
): Promise<T> {
  if (!within) return await withQueryBudget(sql, timeoutMs, fn);
  // Two round trips, statements sent in this order: the budget (the timeout in force kept in a
  // setting of the transaction) with the savepoint, then the evaluation with the timeout put
  // back. The budget is set outside the savepoint, so a rollback to it leaves the budget in
  // force: a failed evaluation puts the timeout back once more.
  const restore = (tx: Sql | Tx) =>
    tx`select set_config('statement_timeout', current_setting('cdp.kept_timeout'), true)`;
  const budget = within`
    with s as materialized (select current_setting('statement_timeout') as previous)
    select set_config('cdp.kept_timeout', s.previous, true),
           set_config('statement_timeout', ${String(timeoutMs)}, true) from s`.execute();
  try {
    const [, [value]] = await Promise.all([
      budget,
      within.savepoint((sp) => Promise.all([fn(sp as unknown as Sql), restore(sp)])),
    ]);
    return value as T;
  } catch (err) {
    await restore(within);
    throw evaluationError(err);
  }
}

/** Statements a profile's segments may fail in before the rest are left unknown. */
const _MEMBERSHIP_FAILURES = 3;

/** Orders segments for evaluation: regex patterns weigh most, then probes, then size. */
function _evaluationCost(cost: ConditionCost): number {
  return cost.patterns * 1_000_000 + cost.probes * 1_000 + cost.nodes;
}

/**
 * Member counts (up to `cap`) of the given segments, null for a count not made: the counts run
 * on as many permits of the brand's share as it has free (none free: every count is null), each
 * permit one connection counting one segment after another, each count a statement within what
 * remains of `budget.timeoutMs`; a count past it or failing (a data error) is null. Only a
 * database outage is thrown.
 */
export async function countSegments(
  sql: Sql,
  segments: Segment[],
  options: { now: Date; cap: number; budget: ReadBudget },
): Promise<(number | null)[]> {
  const counts: (number | null)[] = segments.map(() => null);
  const permits: ReadRelease[] = [];
  try {
    while (permits.length < segments.length) {
      const permit = options.budget.permit();
      if (!permit) break;
      permits.push(permit);
    }
    const clock = options.budget.clock ?? (() => performance.now());
    const deadline = clock() + options.budget.timeoutMs;
    let next = 0;
    const worker = async () => {
      while (next < segments.length) {
        const i = next++;
        const remaining = Math.floor(deadline - clock());
        if (remaining < 1) return;
        try {
          counts[i] = await withQueryBudget(
            sql,
            remaining,
            (tx) => countMembers(tx, segments[i]!, options.now, options.cap),
          );
        } catch (err) {
          const failure = databaseFailure(err instanceof DomainError ? err.cause : err);
          if (failure === "unreachable" || failure === "lost") throw err;
        }
      }
    };
    // Every worker ends before its permit is given back, a failing one included.
    const outcomes = await Promise.allSettled(permits.map(worker));
    const failed = outcomes.find((o) => o.status === "rejected");
    if (failed) throw failed.reason;
  } finally {
    for (const release of permits) release();
  }
  return counts;
}

/**
 * The filter of a segment's members over `profiles p`, after `after` in id order if given: the
 * segment's scope (the predicate the API shows in front of its condition) on the scope column,
 * and its stored tree. A stored condition that no longer parses (saved under older rules, or a
 * date that has left the window as `now` moved) is the segment's failure, not the request's:
 * 502, naming why.
 */
function _members(sql: Sql, segment: Segment, now: Date, after?: string) {
  let condition;
  try {
    condition = compileCondition(sql, storedCondition(segment.condition, now).tree, {
      itemType: "profile",
      scope: segment.scope,
    });
  } catch (err) {
    if (!(err instanceof DomainError) || err.kind !== "invalid_condition") throw err;
    throw new DomainError(
      "upstream_failed",
      `the segment's stored condition cannot be evaluated; update it (${err.message})`,
      { cause: err },
    );
  }
  return sql`p.scope = ${segment.scope} and ${condition}
    ${after === undefined ? sql`` : sql`and p.item_id > ${after}`}`;
}

function _view(scope: string, row: _SegmentRow): Segment {
  return {
    id: row.id,
    name: row.name,
    ...(row.description === null ? {} : { description: row.description }),
    scope,
    condition: row.condition,
  };
}

/** One export page: where it ends, whether members remain after it, and its NDJSON lines. */
export interface ExportPage {
  /** The id of the page's last member; null for an empty page. */
  lastId: string | null;
  more: boolean;
  /** The page's lines, fetched 1,000 rows at a time; cancel it to give the connection back. */
  lines: ReadableStream<Uint8Array>;
}

/**
 * Opens one export page of at most `limit` members after `after`. The condition is evaluated
 * once, under `timeoutMs`: the page (plus one row, to learn whether more remain) is computed
 * into a held scroll cursor on a reserved connection, so X-Next-Cursor is known before the body
 * and the body is read back from that result, never recomputed. No transaction stays open while
 * the lines are read; the connection is released, and `onClose` called, when they end or are
 * cancelled, or when opening fails.
 */
export async function openExport(
  sql: Sql,
  segment: Segment,
  page: { after?: string; limit: number; now: Date; timeoutMs: number; onClose?: () => void },
): Promise<ExportPage> {
  let conn: Awaited<ReturnType<Sql["reserve"]>> | undefined;
  // Embedded PGlite serves every connection from one session, where a held cursor's name must
  // be unique: a random one needs no counter shared by every export. MOVE, FETCH and CLOSE take
  // no parameters: the name is ours (lowercase hex), never input text.
  const cursor = `export_page_${crypto.randomUUID().replaceAll("-", "")}`;
  let state: "transaction" | "held" | "closed" = "transaction";
  const close = async () => {
    if (state === "closed") return;
    const was = state;
    state = "closed";
    try {
      if (conn) await conn.unsafe(was === "transaction" ? "rollback" : `close ${cursor}`);
    } finally {
      conn?.release();
      page.onClose?.();
    }
  };
  try {
    conn = await sql.reserve();
    await conn`begin read only`;
    // Pages walk the primary key (scope, item_id) from the cursor's position, so each page reads
    // only its own stretch of it and the last page starts as fast as the first. A planner that
    // misjudges a condition's selectivity would rather scan every remaining profile and sort
    // them, once per page: sorting is ruled out for this transaction. The page's plan is costed
    // as a scan of the whole brand, past JIT's thresholds, where compiling the line and the
    // condition took longer than reading a page's rows. And the page, kept twice (the CTE, then
    // the held cursor's copy), stays in memory rather than spilling to temporary files.
    await conn`
      select set_config('statement_timeout', ${String(page.timeoutMs)}, true),
             set_config('enable_sort', 'off', true), set_config('jit', 'off', true),
             set_config('work_mem', '32MB', true)`;
    // A held cursor is computed when its transaction commits, and statement_timeout does not
    // apply to a COMMIT. So the page is computed by the MOVE below, a statement it bounds, into
    // a materialized CTE (planned for all its rows); at commit the cursor rewinds that CTE's
    // stored rows (a CTE scan is rescanned from its store) and copies them: the condition is
    // never evaluated again. Each row holds its NDJSON line, written by the database; the
    // columns the line is made of come along only when it could not be (exportLineSql).
    await conn`
      declare ${sql(cursor)} scroll cursor with hold for
      with page as materialized (
        select item_id, line,
               case when line is null then provenance end as provenance,
               case when line is null then properties end as properties,
               case when line is null then first_visit end as first_visit,
               case when line is null then last_visit end as last_visit,
               case when line is null then ${exportPredictionsSql(sql)} end as predictions
        from (
          select p.scope, p.item_id, p.provenance, p.properties, p.first_visit, p.last_visit,
                 ${exportLineSql(sql)} as line
          from profiles p, ${exportFieldsSql(sql)}
          where ${_members(sql, segment, page.now, page.after)}
          order by p.item_id
          limit ${page.limit + 1}) p)
      select * from page`;
    const found = (await conn.unsafe(`move forward all in ${cursor}`)).count;
    const size = Math.min(found, page.limit);
    const [last] = size === 0
      ? []
      : await conn.unsafe<{ item_id: string }[]>(`fetch absolute ${_count(size)} from ${cursor}`);
    await conn.unsafe(`move absolute 0 in ${cursor}`);
    await conn`commit`;
    state = "held";
    let sent = 0;
    const encoder = new TextEncoder();
    const lines = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const rows = sent < size
            ? await conn!.unsafe<_PageRow[]>(
              `fetch forward ${_count(Math.min(_FETCH_ROWS, size - sent))} from ${cursor}`,
            )
            : [];
          if (rows.length === 0) {
            await close();
            return controller.close();
          }
          sent += rows.length;
          let text = "";
          for (const row of rows) {
            text += (row.line ?? JSON.stringify(exportLine(row as ExportRow))) + "\n";
          }
          controller.enqueue(encoder.encode(text));
        } catch (err) {
          await close().catch(() => {});
          controller.error(err);
        }
      },
      async cancel() {
        await close();
      },
    });
    return { lastId: last?.item_id ?? null, more: found > page.limit, lines };
  } catch (err) {
    await close().catch(() => {});
    throw evaluationError(err);
  }
}

/**
 * Every member's export line, page after page of `pageSize`, as a client following X-Next-Cursor
 * reads them: each page is its own {@linkcode openExport} (its own budget and connection), the
 * next opened only when the previous one has been read. The first page is opened before this
 * returns, so a condition that cannot be evaluated fails here, not in the middle of a body.
 * `onClose` is called once, when the last page ends or the stream is cancelled or fails.
 */
export async function openFullExport(
  sql: Sql,
  segment: Segment,
  options: { pageSize: number; now: Date; timeoutMs: number; onClose?: () => void },
): Promise<ReadableStream<Uint8Array>> {
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    options.onClose?.();
  };
  const open = (after?: string) =>
    openExport(sql, segment, {
      ...(after === undefined ? {} : { after }),
      limit: options.pageSize,
      now: options.now,
      timeoutMs: options.timeoutMs,
    });
  let page: ExportPage;
  try {
    page = await open();
  } catch (err) {
    finish();
    throw err;
  }
  let reader = page.lines.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (!done) return controller.enqueue(value);
          if (!page.more || page.lastId === null) {
            finish();
            return controller.close();
          }
          page = await open(page.lastId);
          reader = page.lines.getReader();
        }
      } catch (err) {
        finish();
        controller.error(err);
      }
    },
    async cancel() {
      try {
        await reader.cancel();
      } finally {
        finish();
      }
    },
  });
}

/** Rows per FETCH of an export page: what the service holds of a page at once. */
const _FETCH_ROWS = 1000;

/** A row of an export page: its line, or (line null) the columns exportLine makes it of. */
type _PageRow = Partial<ExportRow> & { item_id: string; line: string | null };

/** A row count for MOVE or FETCH, which take no parameters: a checked integer of ours. */
function _count(count: number): number {
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`bad fetch count ${count}`);
  return count;
}
