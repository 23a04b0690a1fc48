/**
 * Segments: storage of a brand's segments, their members (pages, counts, NDJSON export) and a
 * profile's memberships.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { DomainError } from "../errors.ts";
import { compileCondition, type Condition } from "./conditions.ts";
import { exportFieldsSql, exportLine, exportLineSql, type ExportRow } from "./export_lines.ts";
import { identityOf, type ProfileView, profileView } from "./profiles.ts";
import { evaluationError } from "./queries.ts";

/** A segment as the API shows it. */
export interface SegmentView {
  id: string;
  name: string;
  description?: string;
  scope: string;
  condition: Condition;
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

/** Stores a new segment; `conflict` when its id exists. */
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
): Promise<SegmentView> {
  const inserted = await _persisting(() =>
    sql`
    insert into segments (scope, id, name, description, condition, created_at, updated_at)
    values (${input.scope}, ${input.id}, ${input.name}, ${input.description ?? null},
            ${JSON.stringify(input.condition)}::text::json, ${input.now}, ${input.now})
    on conflict (scope, id) do nothing
    returning id`
  );
  if (inserted.count === 0) {
    throw new DomainError("conflict", `segment ${input.id} exists; update it with PUT`);
  }
  return _view(input.scope, { ...input, description: input.description ?? null });
}

/** A segment of the scope, or null (another brand's is null too). */
export async function getSegment(sql: Sql, scope: string, id: string): Promise<SegmentView | null> {
  const [row] = await sql<_SegmentRow[]>`
    select id, name, description, condition from segments where scope = ${scope} and id = ${id}`;
  return row ? _view(scope, row) : null;
}

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
): Promise<SegmentView | null> {
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
): Promise<{ list: SegmentView[]; total: number }> {
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
  segment: SegmentView,
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
  segment: SegmentView,
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
  segment: SegmentView,
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

/** The ids of the scope's segments a profile belongs to, in id order. */
export async function segmentsOfProfile(
  sql: Sql,
  scope: string,
  profileId: string,
  now: Date,
): Promise<string[]> {
  const segments = await sql<{ id: string; condition: Condition }[]>`
    select id, condition from segments where scope = ${scope} order by id`;
  const member: string[] = [];
  for (const segment of segments) {
    const [row] = await sql`
      select 1 from profiles p
      where p.scope = ${scope} and p.item_id = ${profileId}
        and ${
      compileCondition(sql, segment.condition, {
        itemType: "profile",
        now,
        scope,
        single: true,
      })
    }`;
    if (row) member.push(segment.id);
  }
  return member;
}

/**
 * The filter of a segment's members over `profiles p`, after `after` in id order if given. A
 * stored condition that no longer compiles (saved under older rules, or a date that has left
 * the window as `now` moved) is the segment's failure, not the request's: 502, naming why.
 */
function _members(sql: Sql, segment: SegmentView, now: Date, after?: string) {
  let condition;
  try {
    condition = compileCondition(sql, segment.condition, {
      itemType: "profile",
      now,
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

function _view(scope: string, row: _SegmentRow): SegmentView {
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

let _exports = 0;

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
  segment: SegmentView,
  page: { after?: string; limit: number; now: Date; timeoutMs: number; onClose?: () => void },
): Promise<ExportPage> {
  let conn: Awaited<ReturnType<Sql["reserve"]>> | undefined;
  // Embedded PGlite serves every connection from one session, where a held cursor's name must
  // be unique. MOVE, FETCH and CLOSE take no parameters: the name is ours, never input text.
  const cursor = `export_page_${++_exports}`;
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
               case when line is null then last_visit end as last_visit
        from (
          select p.item_id, p.provenance, p.properties, p.first_visit, p.last_visit,
                 ${exportLineSql(sql)} as line
          from profiles p, ${exportFieldsSql(sql)}
          where ${_members(sql, segment, page.now, page.after)}
          order by p.item_id
          limit ${page.limit + 1}) members)
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
  segment: SegmentView,
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
