/**
 * The query API's reads: counts, metrics and aggregates over profiles or events under a
 * condition, run under a per-query time budget.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { DomainError } from "../errors.ts";
import {
  compileCondition,
  type ConditionNode,
  dateText,
  inDateWindow,
  type ItemType,
  numberValue,
  propertyExpression,
  type PropertySource,
  resolveDateExpr,
  resolveProperty,
  type SqlFragment,
  timestampText,
} from "./conditions.ts";

/** Statistics of POST /cdp/query/{itemType}/{property}/metrics. */
export const METRICS = ["sum", "avg", "min", "max"] as const;
export type Metric = (typeof METRICS)[number];

/**
 * Resolves a metrics or aggregate property: the condition language's allowlist, narrowed to what
 * the query API addresses (profile `properties.*`; event `properties.*`, `flattenedProperties.*`,
 * `timeStamp`, `eventType`). Anything else, scope references included, is 400.
 */
export function statisticsProperty(itemType: ItemType, name: string): PropertySource {
  const addressable = name.startsWith("properties.") ||
    (itemType === "event" &&
      (name.startsWith("flattenedProperties.") || name === "timeStamp" || name === "eventType"));
  const resolved = addressable
    ? resolveProperty(itemType, name)
    : { ok: false as const, message: "not an addressable property of this item type" };
  if (!resolved.ok) {
    throw new DomainError("invalid_input", `property ${name}: ${resolved.message}`);
  }
  return resolved.source;
}

/** The table of an item type (aliased p or e, as the compiler expects) and its filter. */
function _from(
  sql: Sql,
  itemType: ItemType,
  scope: string,
  condition: ConditionNode | null,
) {
  const table = itemType === "profile" ? sql`profiles p` : sql`events e`;
  const scoped = itemType === "profile" ? sql`p.scope = ${scope}` : sql`e.scope = ${scope}`;
  const where = condition
    ? sql`${scoped} and ${compileCondition(sql, condition, { itemType, scope })}`
    : scoped;
  return { table, where };
}

/**
 * The matching items' values as the derived table `v`, computed once per row (`offset 0` keeps
 * the planner from inlining the expression into every aggregate that reads it).
 */
function _values(
  sql: Sql,
  value: SqlFragment,
  table: SqlFragment,
  where: SqlFragment,
): SqlFragment {
  return sql`(select ${value} as v from ${table} where ${where} offset 0) as s`;
}

/** The numeric value of a property, null when absent or not a number (dates: epoch ms). */
function _number(sql: Sql, source: PropertySource): SqlFragment {
  const value = propertyExpression(sql, source);
  if (source.kind === "json") return sql`cdp_jsonb_numeric(${value})`;
  if (source.kind === "timestamptz") return sql`(extract(epoch from ${value}) * 1000)`;
  if (source.kind === "integer") return value;
  throw new DomainError("invalid_input", "metrics and numeric ranges need a numeric property");
}

/** The timestamp value of a property, null when absent or not an ISO date-time. */
function _timestamp(sql: Sql, source: PropertySource): SqlFragment {
  const value = propertyExpression(sql, source);
  if (source.kind === "json") return sql`cdp_try_timestamptz(${value} #>> '{}')`;
  if (source.kind === "timestamptz") return value;
  throw new DomainError("invalid_input", "date aggregates need a date property");
}

/**
 * Runs `fn` in a read-only transaction bounded by `timeoutMs` (statement_timeout, 503 beyond);
 * a condition Postgres refuses to evaluate (a data exception such as a bad regex) is 502.
 */
export async function withQueryBudget<T>(
  sql: Sql,
  timeoutMs: number,
  fn: (tx: Sql) => Promise<T>,
): Promise<T> {
  try {
    return await sql.begin("read only", async (tx) => {
      await tx`select set_config('statement_timeout', ${String(timeoutMs)}, true)`;
      return await fn(tx as unknown as Sql);
    }) as T;
  } catch (err) {
    throw evaluationError(err);
  }
}

/**
 * A condition the database refuses to evaluate as 502 with a generic message (the database's
 * own goes to the log with the cause): a data exception (SQLSTATE class 22, such as a bad regex
 * or a date out of range) or a program limit (class 54, such as an expression too complex).
 * Anything else as is.
 */
export function evaluationError(err: unknown): unknown {
  const code = (err as { code?: unknown })?.code;
  if (
    !(err instanceof DomainError) && typeof code === "string" &&
    (code.startsWith("22") || code.startsWith("54"))
  ) {
    return new DomainError("upstream_failed", "the query could not be evaluated", {
      cause: err,
    });
  }
  return err;
}

/** POST /cdp/query/{itemType}/count. */
export async function countItems(
  sql: Sql,
  input: { itemType: ItemType; scope: string; condition: ConditionNode | null; now: Date },
): Promise<number> {
  const { table, where } = _from(sql, input.itemType, input.scope, input.condition);
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from ${table} where ${where}`;
  return row!.n;
}

/** POST /cdp/query/{itemType}/{property}/metrics: `_sum`, `_avg`, `_min`, `_max` as asked. */
export async function metrics(
  sql: Sql,
  input: {
    itemType: ItemType;
    scope: string;
    property: string;
    metrics: Metric[];
    condition: ConditionNode | null;
    now: Date;
  },
): Promise<Record<string, number | null>> {
  const property = statisticsProperty(input.itemType, input.property);
  const { table, where } = _from(
    sql,
    input.itemType,
    input.scope,
    input.condition,
  );
  const [row] = await sql<
    { sum: string | null; avg: string | null; min: string | null; max: string | null }[]
  >`
    select sum(v)::text as sum, avg(v)::text as avg, min(v)::text as min, max(v)::text as max
    from ${_values(sql, _number(sql, property), table, where)}`;
  const out: Record<string, number | null> = {};
  for (const metric of input.metrics) {
    const raw = row![metric];
    // Elasticsearch answers 0 for the sum of nothing and null for the other statistics.
    out[`_${metric}`] = raw === null ? (metric === "sum" ? 0 : null) : Number(raw);
  }
  return out;
}

/** The aggregate parameter of POST /cdp/query/{itemType}/{property}/aggregate. */
export interface Aggregate {
  type: "date" | "dateRange" | "numericRange";
  interval?: string;
  format?: string;
  ranges?: { key?: string; from?: number | string | null; to?: number | string | null }[];
}

// A Map, never an object literal: a lookup on an object finds inherited names (`constructor`,
// `toString`, `valueOf`) that are no interval.
const _INTERVALS = new Map<string, string>([
  ["1m", "minute"],
  ["minute", "minute"],
  ["1h", "hour"],
  ["hour", "hour"],
  ["1d", "day"],
  ["day", "day"],
  ["1w", "week"],
  ["week", "week"],
  ["1M", "month"],
  ["month", "month"],
  ["1q", "quarter"],
  ["quarter", "quarter"],
  ["1y", "year"],
  ["year", "year"],
]);

/** The date histogram intervals, each with the date_trunc unit it buckets by. */
export const DATE_INTERVALS: ReadonlyMap<string, string> = _INTERVALS;

/**
 * POST /cdp/query/{itemType}/{property}/aggregate: a count per bucket plus `_all` (every item
 * of the scope), `_filtered` (those matching the condition) and `_missing` (matching items
 * without a usable value for the property).
 */
export async function aggregate(
  sql: Sql,
  input: {
    itemType: ItemType;
    scope: string;
    property: string;
    aggregate: Aggregate;
    condition: ConditionNode | null;
    now: Date;
  },
): Promise<Record<string, number>> {
  const property = statisticsProperty(input.itemType, input.property);
  const { table, where } = _from(
    sql,
    input.itemType,
    input.scope,
    input.condition,
  );
  const spec = input.aggregate;
  const values = _values(
    sql,
    spec.type === "numericRange" ? _number(sql, property) : _timestamp(sql, property),
    table,
    where,
  );
  // Without a condition every item of the scope is filtered in: no second count.
  const scoped = _from(sql, input.itemType, input.scope, null);
  const all = input.condition === null
    ? sql`count(*)::int`
    : sql`(select count(*)::int from ${scoped.table} where ${scoped.where})`;
  const results: Record<string, number> = {};
  let totals: { all: number; filtered: number; missing: number };
  if (spec.type === "date") {
    const unit = _INTERVALS.get(spec.interval ?? "");
    if (!unit) {
      throw new DomainError(
        "invalid_input",
        `$.aggregate.interval: must be one of ${[..._INTERVALS.keys()].join(", ")}`,
      );
    }
    // One pass: the null bucket is the missing count, and the buckets sum to the filtered one.
    // Each bucket as epoch milliseconds: the driver reads a timestamptz's text with
    // JavaScript's Date, which takes year 1 for 2001 and a year BC (a value such as
    // 0001-01-01T00:00:00+01:00) for no date at all.
    const rows = await sql<{ bucket: number | null; n: number }[]>`
      select (extract(epoch from date_trunc(${unit}, v, 'UTC')) * 1000)::float8 as bucket,
             count(*)::int as n
      from ${values} group by 1 order by 1`;
    totals = { all: 0, filtered: 0, missing: 0 };
    for (const row of rows) {
      totals.filtered += row.n;
      if (row.bucket === null) totals.missing = row.n;
      else results[formatDate(new Date(row.bucket), spec.format)] = row.n;
    }
    totals.all = input.condition === null
      ? totals.filtered
      : (await sql<{ n: number }[]>`select ${all} as n`)[0]!.n;
  } else {
    const ranges = spec.ranges ?? [];
    const bounds = ranges.map((range, i) => ({
      key: range.key,
      from: _bound(range.from, spec.type, input.now, `$.aggregate.ranges[${i}].from`),
      to: _bound(range.to, spec.type, input.now, `$.aggregate.ranges[${i}].to`),
    }));
    const counts = bounds.map((b, i) =>
      sql`, (count(*) filter (where v is not null
        ${b.from === null ? sql`` : sql`and v >= ${_boundSql(sql, b.from)}`}
        ${b.to === null ? sql`` : sql`and v < ${_boundSql(sql, b.to)}`}))::int as ${sql(`r${i}`)}`
    );
    const [row] = await sql<Record<string, number>[]>`
      select ${all} as all, count(*)::int as filtered,
             (count(*) filter (where v is null))::int as missing
             ${counts.reduce((acc, c) => sql`${acc}${c}`, sql``)}
      from ${values}`;
    totals = { all: row!.all!, filtered: row!.filtered!, missing: row!.missing! };
    bounds.forEach((b, i) => {
      results[b.key ?? _rangeKey(b.from, b.to, spec.type)] = row![`r${i}`] ?? 0;
    });
  }
  return { ...results, _all: totals.all, _filtered: totals.filtered, _missing: totals.missing };
}

/**
 * A range bound: null or absent is an open end; a numericRange bound is a number (a decimal
 * string too, as Unomi reads it); a dateRange bound is ISO 8601, date math or epoch milliseconds
 * (a JSON integer or a string of digits). `path` names it in the error.
 */
function _bound(
  value: number | string | null | undefined,
  type: Aggregate["type"],
  now: Date,
  path: string,
): number | Date | null {
  if (value === undefined || value === null) return null;
  if (type === "numericRange") {
    const n = numberValue(value);
    if (n === undefined) {
      throw new DomainError(
        "invalid_input",
        `${path}: a numericRange bound must be a number (or null for an open end)`,
      );
    }
    return n;
  }
  const text = dateText(value);
  const date = text === undefined ? null : (resolveDateExpr(text, now) ?? _iso(text));
  if (!date) {
    throw new DomainError(
      "invalid_input",
      `${path}: a dateRange bound must be an ISO 8601 date, date math (now-30d/d) or epoch ` +
        `milliseconds, or null for an open end; got ${JSON.stringify(value)}`,
    );
  }
  return date;
}

/** A range bound as SQL: a number as is, a date as timestamptz text PostgreSQL reads. */
function _boundSql(sql: Sql, bound: number | Date): SqlFragment {
  return typeof bound === "number" ? sql`${bound}` : sql`${timestampText(bound)}::timestamptz`;
}

// Another ISO 8601 spelling JavaScript reads, within the years 1 to 9999 like every date here
// (year 0 would be 1 BC to PostgreSQL, and a JavaScript year past 9999 carries a sign).
function _iso(value: string): Date | null {
  const time = Date.parse(value);
  return /^\d{4}-\d{2}-\d{2}/.test(value) && inDateWindow(time) ? new Date(time) : null;
}

function _rangeKey(
  from: number | Date | null,
  to: number | Date | null,
  type: Aggregate["type"],
): string {
  const show = (v: number | Date | null) =>
    v === null ? "*" : type === "numericRange" ? String(v) : (v as Date).toISOString();
  return `${show(from)}-${show(to)}`;
}

/**
 * Formats a bucket date with a Java-style pattern (yyyy, yy, MM, dd, HH, mm, ss and quoted
 * literals), in UTC; ISO 8601 when no format is given.
 */
export function formatDate(date: Date, format?: string): string {
  if (!format) return date.toISOString();
  const pad = (n: number, width = 2) => String(n).padStart(width, "0");
  const tokens: Record<string, string> = {
    // Four digits at least, as Java writes them (year 1 is 0001).
    yyyy: date.getUTCFullYear() < 0 ? String(date.getUTCFullYear()) : pad(date.getUTCFullYear(), 4),
    yy: pad(date.getUTCFullYear() % 100),
    MM: pad(date.getUTCMonth() + 1),
    dd: pad(date.getUTCDate()),
    HH: pad(date.getUTCHours()),
    mm: pad(date.getUTCMinutes()),
    ss: pad(date.getUTCSeconds()),
  };
  return format.replace(
    /'([^']*)'|yyyy|yy|MM|dd|HH|mm|ss/g,
    (match, literal) => literal ?? tokens[match]!,
  );
}
