/**
 * Read-side load benchmark: the engine's query, profile-list and export functions on a brand with
 * 100,000 profiles and 1,000,000 events by default (BENCH_PROFILES, BENCH_EVENTS; plus a second
 * brand of half that size in the same tables, so scope filters matter), each timed side by side, in the same run, with the SQL a DBA
 * would write by hand for the same question (the floor), through the same `postgres` driver on
 * the same database.
 *
 *   deno task bench:engine      (deno run -A --unstable-kv bench/engine_load.ts)
 *
 * 1. Creates a fresh database `bench_engine_<random>` on PostgreSQL (BENCH_DATABASE_URL), runs
 *    the migrations and generates the data set-based (secondary indexes are dropped during the
 *    load and rebuilt from their own definitions), then VACUUM ANALYZE. Generation time is
 *    printed, never measured.
 * 2. For each operation: warm-ups, then iterations alternating which side runs first; p50/p99
 *    of ours and of the floor, and a check that both return the same answer. Ours is called as
 *    the routes call it (conditions parsed by queryCondition as routes/query.ts does, segments
 *    stored through segmentCondition), without the route's read-only transaction, so the
 *    comparison isolates the SQL shape. POST /cdp/query/profile/count is also timed through an
 *    in-process app and reported separately.
 * 3. Export: rows/s of one segment page (openExport, the stream consumed) vs a
 *    `.cursor(1000)` SELECT serialized to the same NDJSON; peak memory while streaming pages of
 *    1,000 and 10,000 lines: rss and heapUsed sampled every 5 ms, and the live heap (heapUsed
 *    after a full collection at every chunk; `--expose-gc` is set at run time through node:v8),
 *    which is what decides "flat in the page size".
 * 3b. Export walk: a full export of a segment of about 30% of the profiles (age < 37), 10,000-line
 *    pages, each page asked for after the previous one's last id as a client follows
 *    X-Next-Cursor: rows/s of the whole walk and each page's time to first byte, beside one
 *    cursor over the same rows (the floor).
 * 4. The same on embedded PGlite (openDatabase, served on its socket) at reduced scale: 10,000
 *    profiles and 100,000 events for brand A, a tenth of brand B's full size (5,000 / 50,000).
 *
 * Prints progress on stderr, markdown tables and one JSON summary line on stdout. Targets are
 * reported PASS/FAIL, never asserted. The exit code is 1 only when the run is invalid (an error,
 * a phase cut short by its time bound, or answers of ours and the floor that differ).
 *
 * Environment (all optional): BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test;
 * an admin connection used to create and drop the scratch database; loopback only),
 * BENCH_ITERATIONS (50), BENCH_WARMUP (5), BENCH_EXPORT_ITERATIONS (20), BENCH_PGLITE (1; 0 skips
 * the embedded pass), BENCH_POSTGRES (1; 0 skips the PostgreSQL pass), BENCH_EXPLAIN (a file:
 * after measuring, append EXPLAIN (ANALYZE, BUFFERS) of every statement each side sends, as the
 * driver prepares it, to that file; PostgreSQL only), BENCH_KEEP_DATABASE (1: keep the PostgreSQL
 * database for diagnosis instead of dropping it; its name is printed), BENCH_PROFILES (100000:
 * brand A's profiles; brand B has half), BENCH_EVENTS (10 per profile), BENCH_GROUPS
 * (`count,metrics,aggregate,list,export,walk`: what to measure, e.g. `count,walk` for a quick run
 * at a million profiles), BENCH_RUN_MINUTES (14: the run's time bound), BENCH_REUSE_DATABASE (a
 * name starting with `bench_engine_`: the PostgreSQL pass uses that database and never drops it;
 * the first run creates and generates it, later runs with the same BENCH_PROFILES and
 * BENCH_EVENTS reuse its data and the clock it was generated with, and print the generation time
 * as 0; other sizes regenerate it. Drop it with `dropdb --force <name>` when done).
 */
import { createKvQueue } from "../lib/ingest/queue.ts";
import v8 from "node:v8";
import vm from "node:vm";
import postgres from "postgres";
import { monotonicFactory } from "ulid";
import { issueApiKey } from "../lib/tenancy/api_keys.ts";
import { createApp } from "../routes/app.ts";
import { createBrand } from "../lib/tenancy/brands.ts";
import { loadConfig } from "../lib/config.ts";
import { openDatabase, type Sql } from "../lib/store/db.ts";
import type { Condition } from "../lib/engine/conditions.ts";
import { createEmbeddedEngine } from "../lib/engine/embedded.ts";
import { listProfileEvents, listProfiles, profileIds } from "../lib/engine/profiles.ts";
import { aggregate, countItems, metrics } from "../lib/engine/queries.ts";
import { exportLine } from "../lib/engine/export_lines.ts";
import {
  createSegment,
  getSegment,
  openExport,
  type Segment,
  segmentId,
} from "../lib/engine/segments.ts";
import { queryCondition, segmentCondition } from "../lib/engine/caller_condition.ts";
import { migrate } from "../lib/store/migrations.ts";
import { openTokenCipher } from "../lib/tenancy/token_cipher.ts";
import { lazyIdentifierHasher } from "../lib/privacy/identifiers.ts";
import { intEnv, percentile, startBenchRun, withTimeout } from "./bench_support.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const PG_URL = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const ITERATIONS = intEnv("BENCH_ITERATIONS", 50);
const WARMUP = intEnv("BENCH_WARMUP", 5);
const EXPORT_ITERATIONS = intEnv("BENCH_EXPORT_ITERATIONS", 20);
const RUN_PGLITE = Deno.env.get("BENCH_PGLITE") !== "0";
const RUN_POSTGRES = Deno.env.get("BENCH_POSTGRES") !== "0";
const EXPLAIN_FILE = Deno.env.get("BENCH_EXPLAIN") || null;
const KEEP_DATABASE = Deno.env.get("BENCH_KEEP_DATABASE") === "1";
const REUSE_DATABASE = Deno.env.get("BENCH_REUSE_DATABASE") || null;
const SCOPE_A = "a-bench.myshopify.com";
const SCOPE_B = "b-bench.myshopify.com";
/** Events of the one heavy profile (k = 50 of brand A, a server profile without aliases). */
const HEAVY_EVENTS = 2000;
const HEAVY_K = 50;
const MEMORY_SAMPLE_MS = 5;
const MEMORY_REPS = 5;
/** Fewer samples than this makes a row invalid (a time bound cut it short). */
const MIN_SAMPLES = 5;
/** Time bound of one operation (both sides, warm-ups included) and of the whole run. */
const OP_LIMIT_MS = 40_000;
const CALL_LIMIT_MS = 60_000;
/** One export call: far above a healthy page (~0.1 s), short enough to report a stall. */
const EXPORT_CALL_LIMIT_MS = 20_000;
const RUN_LIMIT_MS = intEnv("BENCH_RUN_MINUTES", 14) * 60_000;
const STARTED = performance.now();
const RUN = startBenchRun("engine_load", RUN_LIMIT_MS);
const { progress, onCleanup, tempDir } = RUN;
const runLeftMs = RUN.leftMs;
const cleanupAll = () => RUN.cleanupAll(30_000);
/**
 * The clock of the whole run: data is generated relative to it and every query reads it. A reused
 * database brings back the clock it was generated with.
 */
let NOW = new Date();
const DAY_MS = 86_400_000;

// Targets (reported, never asserted).
const RATIO_TARGET = 2;
const COUNT_RATIO_TARGET = 1.5;
const LATENCY_TARGET_MS = 100;
const EXPORT_ROWS_PER_SECOND_TARGET = 50_000;
const MEMORY_RATIO_TARGET = 2;
/** Peak differences below this are GC noise, not growth with the page size. */
const MEMORY_NOISE_BYTES = 4 * 1024 * 1024;

function assertLoopback(url: string): void {
  const host = new URL(url).hostname;
  if (!["127.0.0.1", "localhost", "[::1]"].includes(host)) {
    throw new Error(`BENCH_DATABASE_URL must point at 127.0.0.1 (got ${host})`);
  }
}

// --- data -----------------------------------------------------------------------------------

interface Scale {
  label: string;
  profilesA: number;
  eventsA: number;
  profilesB: number;
  eventsB: number;
}

const PROFILES_A = intEnv("BENCH_PROFILES", 100_000);
const EVENTS_A = intEnv("BENCH_EVENTS", 10 * PROFILES_A);
const FULL: Scale = {
  label: `full scale (${PROFILES_A} profiles, ${EVENTS_A} events)`,
  profilesA: PROFILES_A,
  eventsA: EVENTS_A,
  profilesB: Math.floor(PROFILES_A / 2),
  eventsB: Math.floor(EVENTS_A / 2),
};
/** The operation groups to measure (all by default), e.g. `count,export` for a quick run. */
const GROUPS = new Set(
  (Deno.env.get("BENCH_GROUPS") ?? "count,metrics,aggregate,list,export,walk").split(","),
);

const REDUCED: Scale = {
  label: "REDUCED scale (1/10)",
  profilesA: 10_000,
  eventsA: 100_000,
  profilesB: 5_000,
  eventsB: 50_000,
};

/**
 * Profile k of a brand: ids are hashed, so buckets interleave in id order. k % 100 in [0, 3) is
 * merged (and has one alias), [3, 15) pixel (`anon_` ids), the rest server (`store_` ids).
 */
function profileIdSql(sql: Sql, tag: string, k: postgres.PendingQuery<postgres.Row[]>) {
  return sql`(case when ${k} % 100 between 3 and 14 then 'anon_' else 'store_' end
    || substr(md5(${tag}::text || ${k}::text), 1, 16))`;
}

function aliasIdSql(sql: Sql, tag: string, k: postgres.PendingQuery<postgres.Row[]>) {
  return sql`('anon_' || substr(md5(${tag}::text || ${k}::text || '/alias'), 1, 16))`;
}

/** One brand's profiles, aliases, events and sessions, set-based, in one transaction. */
async function generateBrand(
  sql: Sql,
  input: { scope: string; tag: string; profiles: number; events: number; heavy: boolean },
): Promise<void> {
  const { scope, tag, profiles, events } = input;
  const now = NOW.toISOString();
  const heavy = input.heavy ? HEAVY_EVENTS : 0;
  // About 1% of a brand's events were sent to an id its profile absorbed later.
  const aliasEvents = Math.floor(events / 100);
  const merged = Math.floor(profiles / 100) - 1; // k = 100, 200, ... (k % 100 = 0: merged)
  await sql.begin(async (tx) => {
    const t = tx as unknown as Sql;
    await t`select set_config('synchronous_commit', 'off', true)`;
    // Generating a million profiles' events takes minutes: beyond the pool's statement bound.
    await t`select set_config('statement_timeout', '0', true)`;
    await t`select setseed(${tag === "a" ? 0.25 : 0.75})`;
    await t`
      insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                            nb_of_visits, created_at, updated_at)
      select ${scope}, ${profileIdSql(t, tag, t`s.k`)},
             jsonb_strip_nulls(jsonb_build_object(
               'shopDomain', ${scope}::text,
               'email', case when s.r_email < 0.7
                 then 'customer' || s.k || '@' || ${tag}::text || '.example.com' end,
               'firstName', (array['Ada', 'Ben', 'Cleo', 'Dan', 'Eve', 'Finn', 'Gia', 'Hal',
                                   'Ivy', 'Jon', 'Kai', 'Lea'])[1 + s.k % 12],
               'age', 18 + floor(s.r_age * 63)::int,
               'tier', case when s.r_tier < 0.15 then 'gold'
                            when s.r_tier < 0.5 then 'silver' else 'bronze' end,
               'tags', (array['["vip"]', '["newsletter"]', '["vip", "wholesale"]', '[]',
                              '["newsletter", "sms"]'])[1 + s.k % 5]::jsonb)),
             case when s.k % 100 < 3 then 'merged' when s.k % 100 < 15 then 'pixel'
                  else 'server' end,
             s.first_visit,
             s.first_visit + s.r_last * (${now}::timestamptz - s.first_visit),
             1 + floor(s.r_visits * 20)::int,
             s.first_visit, ${now}::timestamptz
      from (
        select k, random() as r_email, random() as r_age, random() as r_tier,
               random() as r_last, random() as r_visits,
               ${now}::timestamptz - random() * interval '365 days' as first_visit
        from generate_series(1, ${profiles}::int) as k
      ) s`;
    await t`
      insert into profile_aliases (scope, alias_id, profile_id, merged_at)
      select ${scope}, ${aliasIdSql(t, tag, t`k`)}, ${profileIdSql(t, tag, t`k`)},
             ${now}::timestamptz - random() * interval '180 days'
      from generate_series(1, ${profiles}::int) as k
      where k % 100 < 3`;
    // Event types with a storefront's skew; order_created is 3%.
    await t`
      insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                          flattened_properties, target, source, received_at)
      select ${scope}, 'ev_' || ${tag}::text || '_' || lpad(s.g::text, 8, '0'), s.pid,
             s.pid || ':' || to_char(s.ts at time zone 'UTC', 'YYYY-MM-DD'),
             s.et, s.ts,
             case s.et
               when 'order_created' then jsonb_build_object(
                 'orderId', 'o' || s.g, 'total', round((5 + s.r_amount * 295)::numeric, 2),
                 'currency', 'USD', 'itemCount', 1 + floor(s.r_amount * 5)::int)
               when 'checkout_completed' then jsonb_build_object(
                 'checkoutId', 'c' || s.g, 'total', round((5 + s.r_amount * 295)::numeric, 2),
                 'currency', 'USD')
               when 'product_viewed' then jsonb_build_object(
                 'productId', (1000 + s.g % 700)::text,
                 'url', 'https://' || ${scope}::text || '/products/p' || (s.g % 700),
                 'price', round((5 + s.r_amount * 95)::numeric, 2))
               else jsonb_build_object(
                 'url', 'https://' || ${scope}::text || '/pages/' || (s.g % 500))
             end,
             '{}'::jsonb, null,
             case when s.et in ('order_created', 'updateProperties', 'customer_updated',
                                'refund_issued') then 'server' else 'pixel' end,
             s.ts
      from (
        select x.g, x.r_amount, x.ts,
               case when x.alias then ${aliasIdSql(t, tag, t`x.k`)}
                    else ${profileIdSql(t, tag, t`x.k`)} end as pid,
               case when x.r < 0.39 then 'page_viewed'
                    when x.r < 0.61 then 'product_viewed'
                    when x.r < 0.69 then 'collection_viewed'
                    when x.r < 0.76 then 'product_added_to_cart'
                    when x.r < 0.81 then 'cart_viewed'
                    when x.r < 0.86 then 'search_submitted'
                    when x.r < 0.90 then 'checkout_started'
                    when x.r < 0.93 then 'updateProperties'
                    when x.r < 0.96 then 'order_created'
                    when x.r < 0.985 then 'checkout_completed'
                    when x.r < 0.995 then 'customer_updated'
                    else 'refund_issued' end as et
        from (
          select g, random() as r, random() as r_amount,
                 ${now}::timestamptz - random() * interval '365 days' as ts,
                 g > ${heavy}::int and g <= ${heavy + aliasEvents}::int as alias,
                 case when g <= ${heavy}::int then ${HEAVY_K}::int
                      when g <= ${heavy + aliasEvents}::int
                        then 100 * (1 + floor(random() * ${merged}::int))::int
                      else 1 + floor(random() * ${profiles}::int)::int end as k
          from generate_series(1, ${events}::int) as g
        ) x
      ) s`;
    await t`
      insert into sessions (scope, item_id, profile_id, first_event_at, last_event_at,
                            event_count)
      select scope, session_id, min(profile_id), min(time_stamp), max(time_stamp),
             count(*)::int
      from events where scope = ${scope}
      group by scope, session_id`;
  });
}

/** Generates both brands with secondary indexes dropped, rebuilds them, VACUUM ANALYZE. */
async function generate(sql: Sql, scale: Scale, mode: "postgres" | "pglite"): Promise<number> {
  const started = performance.now();
  const indexes = await sql<{ indexname: string; indexdef: string }[]>`
    select i.indexname, i.indexdef from pg_indexes i
    where i.schemaname = current_schema()
      and i.tablename in ('profiles', 'profile_aliases', 'events', 'sessions')
      and not exists (select 1 from pg_constraint c where c.conname = i.indexname)`;
  for (const index of indexes) await sql`drop index ${sql(index.indexname)}`;
  progress(`  brand A: ${scale.profilesA} profiles, ${scale.eventsA} events`);
  await generateBrand(sql, {
    scope: SCOPE_A,
    tag: "a",
    profiles: scale.profilesA,
    events: scale.eventsA,
    heavy: true,
  });
  progress(`  brand B: ${scale.profilesB} profiles, ${scale.eventsB} events`);
  await generateBrand(sql, {
    scope: SCOPE_B,
    tag: "b",
    profiles: scale.profilesB,
    events: scale.eventsB,
    heavy: false,
  });
  progress(`  rebuilding ${indexes.length} secondary indexes`);
  await sql.begin(async (tx) => {
    if (mode === "postgres") await tx`set local maintenance_work_mem = '256MB'`;
    await tx`set local statement_timeout = 0`;
    for (const index of indexes) await tx.unsafe(index.indexdef); // from pg_indexes itself
  });
  progress("  vacuum analyze");
  const conn = await sql.reserve();
  try {
    await conn`set statement_timeout = 0`;
    await conn.unsafe("vacuum analyze").simple();
    await conn`reset statement_timeout`;
  } finally {
    conn.release();
  }
  return performance.now() - started;
}

/**
 * BENCH_REUSE_DATABASE: true when the database holds data of this scale (its clock becomes the
 * run's, and what earlier runs wrote beside the data is removed); false when it must be generated.
 */
async function reuseData(sql: Sql, scale: Scale): Promise<boolean> {
  const [meta] = await sql<{ profiles: number; events: number; now: Date }[]>`
    select profiles, events, now from bench_engine_meta`.catch(() => []);
  await sql`delete from segments`;
  await sql`delete from brands`;
  if (!meta || meta.profiles !== scale.profilesA || meta.events !== scale.eventsA) {
    await sql`drop table if exists bench_engine_meta`;
    await sql`truncate profiles, profile_aliases, events, sessions, profile_predictions`;
    return false;
  }
  NOW = meta.now;
  progress(`  reusing the data generated for now = ${NOW.toISOString()}`);
  return true;
}

/** Records the scale and clock of freshly generated data, for BENCH_REUSE_DATABASE. */
async function rememberData(sql: Sql, scale: Scale): Promise<void> {
  await sql`drop table if exists bench_engine_meta`;
  await sql`create table bench_engine_meta (profiles int, events int, now timestamptz)`;
  await sql`insert into bench_engine_meta values (${scale.profilesA}, ${scale.eventsA}, ${NOW})`;
}

// --- measurement ----------------------------------------------------------------------------

function median(values: number[]): number {
  return percentile(values, 50);
}

/** One operation: ours and the floor, and how to tell whether they answered the same. */
interface Pair<A, B> {
  name: string;
  group: "count" | "metrics" | "aggregate" | "list" | "export";
  ours: () => Promise<A>;
  floor: () => Promise<B>;
  /** null when the answers agree, else what differs. */
  same: (ours: A, floor: B) => string | null;
  /** Informational row (no PASS/FAIL against the 2x target). */
  info?: boolean;
  iterations?: number;
  warmup?: number;
  callLimitMs?: number;
}

interface Row {
  name: string;
  group: Pair<unknown, unknown>["group"];
  info: boolean;
  ours: number[];
  floor: number[];
  oursP50: number;
  oursP99: number;
  floorP50: number;
  floorP99: number;
  ratio: number;
  mismatch: string | null;
  truncated: boolean;
  oursResult: unknown;
  floorResult: unknown;
}

async function timed<T>(
  fn: () => Promise<T>,
  what: string,
  limitMs = CALL_LIMIT_MS,
): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await withTimeout(fn(), limitMs, what);
  return { ms: performance.now() - t0, value };
}

/** Warm-ups, then iterations alternating which side runs first, within OP_LIMIT_MS. */
async function measure<A, B>(pair: Pair<A, B>): Promise<Row> {
  const started = performance.now();
  const limit = Math.min(OP_LIMIT_MS, Math.max(0, runLeftMs() - 60_000));
  const over = () => performance.now() - started > limit;
  const first = await timed(pair.ours, `${pair.name} (ours)`, pair.callLimitMs);
  const firstFloor = await timed(pair.floor, `${pair.name} (floor)`, pair.callLimitMs);
  const mismatch = pair.same(first.value, firstFloor.value);
  const warmup = pair.warmup ?? WARMUP;
  for (let i = 1; i < warmup && !over(); i++) {
    await timed(pair.ours, pair.name, pair.callLimitMs);
    await timed(pair.floor, pair.name, pair.callLimitMs);
  }
  const iterations = pair.iterations ?? ITERATIONS;
  const ours: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < iterations; i++) {
    if (over() && i >= MIN_SAMPLES) break;
    if (i % 2 === 0) {
      ours.push((await timed(pair.ours, pair.name, pair.callLimitMs)).ms);
      floor.push((await timed(pair.floor, pair.name, pair.callLimitMs)).ms);
    } else {
      floor.push((await timed(pair.floor, pair.name, pair.callLimitMs)).ms);
      ours.push((await timed(pair.ours, pair.name, pair.callLimitMs)).ms);
    }
  }
  const row: Row = {
    name: pair.name,
    group: pair.group,
    info: pair.info ?? false,
    ours,
    floor,
    oursP50: percentile(ours, 50),
    oursP99: percentile(ours, 99),
    floorP50: percentile(floor, 50),
    floorP99: percentile(floor, 99),
    ratio: percentile(ours, 50) / percentile(floor, 50),
    mismatch,
    truncated: ours.length < iterations,
    oursResult: first.value,
    floorResult: firstFloor.value,
  };
  progress(
    `  ${pair.name}: ours p50 ${row.oursP50.toFixed(2)} ms, floor p50 ${
      row.floorP50.toFixed(2)
    } ms, x${row.ratio.toFixed(2)} (n=${ours.length})${mismatch ? ` MISMATCH: ${mismatch}` : ""}`,
  );
  return row;
}

// --- comparisons ----------------------------------------------------------------------------

function diffNumbers(label: string, a: number | null, b: number | null): string | null {
  if (a === null || b === null) return a === b ? null : `${label}: ${a} vs ${b}`;
  const tolerance = 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
  return Math.abs(a - b) <= tolerance ? null : `${label}: ${a} vs ${b}`;
}

function firstDiff(diffs: (string | null)[]): string | null {
  return diffs.find((d) => d !== null) ?? null;
}

function sameIds(a: string[], b: string[]): string | null {
  if (a.length !== b.length) return `${a.length} vs ${b.length} items`;
  const at = a.findIndex((id, i) => id !== b[i]);
  return at < 0 ? null : `item ${at}: ${a[at]} vs ${b[at]}`;
}

// --- export ---------------------------------------------------------------------------------

interface Drained {
  lines: number;
  bytes: number;
}

async function drain(
  chunks: AsyncIterable<Uint8Array>,
  onChunk?: () => void,
): Promise<Drained> {
  let lines = 0;
  let bytes = 0;
  for await (const chunk of chunks) {
    bytes += chunk.byteLength;
    for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
    onChunk?.();
  }
  return { lines, bytes };
}

async function exportOurs(
  sql: Sql,
  segment: Segment,
  limit: number,
  onChunk?: () => void,
): Promise<Drained> {
  const page = await openExport(sql, segment, { limit, now: NOW, timeoutMs: 60_000 });
  return await drain(page.lines, onChunk);
}

async function exportFloor(
  sql: Sql,
  scope: string,
  gold: boolean,
  limit: number,
  onChunk?: () => void,
): Promise<Drained> {
  const encoder = new TextEncoder();
  const cursor = sql<{
    item_id: string;
    provenance: string;
    properties: Record<string, unknown>;
    first_visit: Date | null;
    last_visit: Date | null;
  }[]>`
    select item_id, provenance, properties, first_visit, last_visit from profiles
    where scope = ${scope} ${gold ? sql`and properties ->> 'tier' = 'gold'` : sql``}
    order by item_id limit ${limit}`.cursor(1000);
  async function* chunks() {
    for await (const rows of cursor) {
      yield encoder.encode(rows.map((row) => JSON.stringify(exportLine(row)) + "\n").join(""));
    }
  }
  return await drain(chunks(), onChunk);
}

interface MemoryPeak {
  rss: number;
  heap: number;
}

/**
 * A full collection, for the live-heap measurement only: `--expose-gc` set at run time (the task
 * line stays plain) and `gc` fetched from a fresh context, as in Node. Null if unavailable.
 */
const collect: (() => void) | null = (() => {
  try {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc");
    return typeof gc === "function" ? gc as () => void : null;
  } catch {
    return null;
  }
})();

/**
 * Peak heapUsed that survives a full collection, forced after every chunk the consumer takes,
 * above the same level before `fn`: what the stream retains, without the garbage a young
 * generation holds until its next scavenge.
 */
async function peakLiveHeap(fn: (sample: () => void) => Promise<unknown>): Promise<number> {
  collect!();
  const base = Deno.memoryUsage().heapUsed;
  let peak = base;
  const sample = () => {
    collect!();
    peak = Math.max(peak, Deno.memoryUsage().heapUsed);
  };
  await fn(sample);
  return peak - base;
}

/** Peak rss and heapUsed above the level just before `fn`, sampled every 5 ms and per chunk. */
async function peakMemory(fn: (sample: () => void) => Promise<unknown>): Promise<MemoryPeak> {
  const base = Deno.memoryUsage();
  let rss = base.rss;
  let heap = base.heapUsed;
  const sample = () => {
    const m = Deno.memoryUsage();
    if (m.rss > rss) rss = m.rss;
    if (m.heapUsed > heap) heap = m.heapUsed;
  };
  const timer = setInterval(sample, MEMORY_SAMPLE_MS);
  try {
    await fn(sample);
  } finally {
    clearInterval(timer);
  }
  sample();
  return { rss: rss - base.rss, heap: heap - base.heapUsed };
}

interface MemoryRow {
  who: "ours" | "floor";
  pageSize: number;
  lines: number;
  rss: number[];
  heap: number[];
  live: number[];
}

// --- HTTP (in-process app) ------------------------------------------------------------------

async function httpCountPair(
  sql: Sql,
  scope: string,
  condition: Condition,
): Promise<{ request: () => Promise<number>; close: () => Promise<void> }> {
  const kv = await Deno.openKv(":memory:");
  const newId = monotonicFactory();
  const now = () => NOW;
  const cipher = await openTokenCipher(kv, undefined);
  const brand = await createBrand({ sql, newId, now, cipher }, { name: "Bench", shop: scope });
  const issued = await issueApiKey({ kv, now, newId }, { brandId: brand.id });
  const config = loadConfig({
    DATA_DIR: "/nonexistent",
    RATE_LIMIT_PER_MINUTE: "10000000",
    BRAND_RATE_LIMIT_PER_MINUTE: "10000000",
    QUERY_RATE_LIMIT_PER_MINUTE: "10000000",
    BRAND_QUERY_RATE_LIMIT_PER_MINUTE: "10000000",
  });
  const app = createApp({
    kv,
    queue: createKvQueue(kv, { newId }),
    sql,
    engine: createEmbeddedEngine({ sql, now }),
    now,
    newId,
    config,
    cipher,
    hasher: lazyIdentifierHasher(kv, undefined),
  });
  const body = JSON.stringify({ condition });
  return {
    async request() {
      const res = await app.request("/cdp/query/profile/count", {
        method: "POST",
        headers: { Authorization: `Bearer ${issued.key}`, "Content-Type": "application/json" },
        body,
      });
      if (res.status !== 200) throw new Error(`count route answered ${res.status}`);
      return (await res.json()).count as number;
    },
    close: () => Promise.resolve(kv.close()),
  };
}

// --- conditions -----------------------------------------------------------------------------

const TIER_GOLD: Condition = {
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.tier",
    comparisonOperator: "equals",
    propertyValue: "gold",
  },
};

const AGE_30_40_WITH_EMAIL: Condition = {
  type: "booleanCondition",
  parameterValues: {
    operator: "and",
    subConditions: [
      {
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.age",
          comparisonOperator: "between",
          propertyValuesInteger: [30, 40],
        },
      },
      {
        type: "profilePropertyCondition",
        parameterValues: { propertyName: "properties.email", comparisonOperator: "exists" },
      },
    ],
  },
};

const ORDERED_LAST_90_DAYS: Condition = {
  type: "pastEventCondition",
  parameterValues: {
    eventCondition: {
      type: "eventTypeCondition",
      parameterValues: { eventTypeId: "order_created" },
    },
    numberOfDays: 90,
    minimumEventCount: 1,
  },
};

const ORDERS_LAST_30_DAYS: Condition = {
  type: "booleanCondition",
  parameterValues: {
    operator: "and",
    subConditions: [
      { type: "eventTypeCondition", parameterValues: { eventTypeId: "order_created" } },
      {
        type: "eventPropertyCondition",
        parameterValues: {
          propertyName: "timeStamp",
          comparisonOperator: "greaterThan",
          propertyValueDateExpr: "now-30d",
        },
      },
    ],
  },
};

const MATCH_ALL: Condition = { type: "matchAllCondition", parameterValues: {} };

// --- one pass (a store at a scale) ----------------------------------------------------------

interface PassResult {
  store: string;
  scale: Scale;
  generationMs: number;
  rows: Row[];
  exports: {
    name: string;
    pageSize: number;
    lines: number;
    oursRowsPerSecond: number;
    floorRowsPerSecond: number;
    row: Row;
  }[];
  memory: MemoryRow[];
  /** Why the export could not be measured (a stalled stream), else null. */
  exportFailure: string | null;
  http: { name: string; p50: number; p99: number; libraryP50: number; n: number } | null;
  walk: WalkResult | null;
  invalid: string[];
}

async function runPass(sql: Sql, store: string, scale: Scale): Promise<PassResult> {
  const mode = store === "PostgreSQL" ? "postgres" : "pglite";
  progress(`${store} (${scale.label}): migrating`);
  await migrate(sql);
  const reused = mode === "postgres" && REUSE_DATABASE !== null && await reuseData(sql, scale);
  let generationMs = 0;
  if (!reused) {
    progress(`${store}: generating data`);
    generationMs = await generate(sql, scale, mode);
    progress(`${store}: generated in ${(generationMs / 1000).toFixed(1)} s`);
    if (mode === "postgres" && REUSE_DATABASE !== null) await rememberData(sql, scale);
  }
  const invalid: string[] = [];
  const scope = SCOPE_A;
  const since = (days: number) => new Date(NOW.getTime() - days * DAY_MS).toISOString();
  const profileCount = (c: Condition | null) =>
    countItems(sql, {
      itemType: "profile",
      scope,
      condition: queryCondition(c ?? undefined, "profile", NOW),
      now: NOW,
    });
  const one = async (query: postgres.PendingQuery<postgres.Row[]>) => Number((await query)[0]!.n);
  const countPair = (
    name: string,
    ours: () => Promise<number>,
    floor: () => Promise<number>,
  ): Pair<number, number> => ({
    name,
    group: "count",
    ours,
    floor,
    same: (a, b) => diffNumbers("count", a, b),
  });

  const pairs: Pair<never, never>[] = [];
  const add = <A, B>(pair: Pair<A, B>) => pairs.push(pair as unknown as Pair<never, never>);

  // count
  add(countPair(
    "count profiles (a) no condition",
    () => profileCount(null),
    () => one(sql`select count(*)::int as n from profiles where scope = ${scope}`),
  ));
  add(countPair(
    "count profiles (b) tier = gold",
    () => profileCount(TIER_GOLD),
    () =>
      one(sql`
        select count(*)::int as n from profiles
        where scope = ${scope} and properties ->> 'tier' = 'gold'`),
  ));
  add(countPair(
    "count profiles (c) age 30..40 and email exists",
    () => profileCount(AGE_30_40_WITH_EMAIL),
    () =>
      one(sql`
        select count(*)::int as n from profiles
        where scope = ${scope} and (properties ->> 'age')::numeric between 30 and 40
          and properties ? 'email'`),
  ));
  add(countPair(
    "count profiles (d) order_created in 90 d (pastEvent)",
    () => profileCount(ORDERED_LAST_90_DAYS),
    () =>
      one(sql`
        select count(*)::int as n from profiles p
        where p.scope = ${scope} and p.item_id in (
          select coalesce(a.profile_id, e.profile_id) from events e
          left join profile_aliases a on a.scope = e.scope and a.alias_id = e.profile_id
          where e.scope = ${scope} and e.event_type = 'order_created'
            and e.time_stamp > ${since(90)}::timestamptz)`),
  ));
  add(countPair(
    "count events order_created in 30 d",
    () =>
      countItems(sql, {
        itemType: "event",
        scope,
        condition: queryCondition(ORDERS_LAST_30_DAYS, "event", NOW),
        now: NOW,
      }),
    () =>
      one(sql`
        select count(*)::int as n from events
        where scope = ${scope} and event_type = 'order_created'
          and time_stamp > ${since(30)}::timestamptz`),
  ));

  // metrics
  type Stats = { sum: string | null; avg: string | null; min: string | null; max: string | null };
  const sameStats = (a: Record<string, number | null>, b: Stats) =>
    firstDiff(
      (["sum", "avg", "min", "max"] as const).map((m) =>
        diffNumbers(m, a[`_${m}`] ?? null, b[m] === null ? null : Number(b[m]))
      ),
    );
  add<Record<string, number | null>, Stats>({
    name: "metrics profile age sum/avg/min/max, tier = gold",
    group: "metrics",
    ours: () =>
      metrics(sql, {
        itemType: "profile",
        scope,
        property: "properties.age",
        metrics: ["sum", "avg", "min", "max"],
        condition: queryCondition(TIER_GOLD, "profile", NOW),
        now: NOW,
      }),
    floor: async () =>
      (await sql<Stats[]>`
        select sum((properties ->> 'age')::numeric)::text as sum,
               avg((properties ->> 'age')::numeric)::text as avg,
               min((properties ->> 'age')::numeric)::text as min,
               max((properties ->> 'age')::numeric)::text as max
        from profiles where scope = ${scope} and properties ->> 'tier' = 'gold'`)[0]!,
    same: sameStats,
  });
  add<Record<string, number | null>, Stats>({
    name: "metrics event total sum/avg/min/max, order_created",
    group: "metrics",
    ours: () =>
      metrics(sql, {
        itemType: "event",
        scope,
        property: "properties.total",
        metrics: ["sum", "avg", "min", "max"],
        condition: queryCondition(
          { type: "eventTypeCondition", parameterValues: { eventTypeId: "order_created" } },
          "event",
          NOW,
        ),
        now: NOW,
      }),
    floor: async () =>
      (await sql<Stats[]>`
        select sum((properties ->> 'total')::numeric)::text as sum,
               avg((properties ->> 'total')::numeric)::text as avg,
               min((properties ->> 'total')::numeric)::text as min,
               max((properties ->> 'total')::numeric)::text as max
        from events where scope = ${scope} and event_type = 'order_created'`)[0]!,
    same: sameStats,
  });

  // aggregate
  type Ranges = { all: number; present: number; r0: number; r1: number; r2: number };
  add<Record<string, number>, Ranges>({
    name: "aggregate profile age numericRange (3 ranges)",
    group: "aggregate",
    ours: () =>
      aggregate(sql, {
        itemType: "profile",
        scope,
        property: "properties.age",
        aggregate: {
          type: "numericRange",
          ranges: [{ to: 30 }, { from: 30, to: 50 }, { from: 50 }],
        },
        condition: null,
        now: NOW,
      }),
    floor: async () =>
      (await sql<Ranges[]>`
        select count(*)::int as all, count(age)::int as present,
               (count(*) filter (where age < 30))::int as r0,
               (count(*) filter (where age >= 30 and age < 50))::int as r1,
               (count(*) filter (where age >= 50))::int as r2
        from (select (properties ->> 'age')::numeric as age from profiles
              where scope = ${scope}) s`)[0]!,
    same: (a, b) =>
      firstDiff([
        diffNumbers("_all", a._all ?? null, b.all),
        diffNumbers("_filtered", a._filtered ?? null, b.all),
        diffNumbers("_missing", a._missing ?? null, b.all - b.present),
        diffNumbers("*-30", a["*-30"] ?? null, b.r0),
        diffNumbers("30-50", a["30-50"] ?? null, b.r1),
        diffNumbers("50-*", a["50-*"] ?? null, b.r2),
      ]),
  });
  add<Record<string, number>, { bucket: Date; n: number }[]>({
    name: "aggregate event timeStamp date histogram by month",
    group: "aggregate",
    ours: () =>
      aggregate(sql, {
        itemType: "event",
        scope,
        property: "timeStamp",
        aggregate: { type: "date", interval: "month" },
        condition: null,
        now: NOW,
      }),
    floor: () =>
      sql<{ bucket: Date; n: number }[]>`
        select date_trunc('month', time_stamp, 'UTC') as bucket, count(*)::int as n
        from events where scope = ${scope} group by 1 order by 1`,
    same: (a, b) => {
      const total = b.reduce((s, r) => s + r.n, 0);
      return firstDiff([
        diffNumbers("_all", a._all ?? null, total),
        diffNumbers("_filtered", a._filtered ?? null, total),
        diffNumbers("_missing", a._missing ?? null, 0),
        diffNumbers("buckets", Object.keys(a).length - 3, b.length),
        ...b.map((r) =>
          diffNumbers(r.bucket.toISOString(), a[r.bucket.toISOString()] ?? null, r.n)
        ),
      ]);
    },
  });

  // profile lists
  const [counted] = await sql<{ customers: number }[]>`
    select count(*)::int as customers from profiles
    where scope = ${scope} and provenance = 'server'`;
  const customers = counted!.customers;
  const deepOffset = Math.min(9900, customers - 100);
  const [mid] = await sql<{ item_id: string }[]>`
    select item_id from profiles where scope = ${scope} and provenance = 'server'
    order by item_id offset ${Math.floor(customers / 2)} limit 1`;
  const midId = mid!.item_id;
  type ListRow = { item_id: string };
  const listColumns = sql`item_id, properties, provenance, first_visit, last_visit, nb_of_visits`;
  const profilesFloor = (extra: postgres.PendingQuery<postgres.Row[]>, offset: number) =>
    sql<ListRow[]>`
      select ${listColumns} from profiles
      where scope = ${scope} and provenance = 'server' ${extra}
      order by item_id limit 25 offset ${offset}`;
  const cappedCustomers = () =>
    sql`
      select count(*)::int as total from (
        select 1 from profiles where scope = ${scope} and provenance = 'server' limit 10001) c`;
  const listPair = (
    name: string,
    page: { offset: number; after?: string },
    extra: postgres.PendingQuery<postgres.Row[]>,
  ) => {
    add<{ list: { itemId: string }[] }, ListRow[]>({
      name,
      group: "list",
      ours: () =>
        listProfiles(sql, scope, {
          bucket: "customers",
          sort: "itemId.keyword:asc",
          limit: 25,
          offset: page.offset,
          after: page.after,
        }),
      // The answer carries totalSize (capped), so the floor counts too.
      floor: async () => {
        const rows = await profilesFloor(extra, page.after === undefined ? page.offset : 0);
        await cappedCustomers();
        return rows;
      },
      same: (a, b) => sameIds(a.list.map((p) => p.itemId), b.map((r) => r.item_id)),
    });
  };
  listPair("listProfiles customers first page (25)", { offset: 0 }, sql``);
  listPair(`listProfiles customers offset ${deepOffset}`, { offset: deepOffset }, sql``);
  listPair(
    "listProfiles customers keyset (after mid id)",
    { offset: 0, after: midId },
    sql`
    and item_id > ${midId}`,
  );

  // profile events (the heavy profile)
  const [heavyRow] = await sql<{ id: string }[]>`
    select ${profileIdSql(sql, "a", sql`${HEAVY_K}::int`)} as id`;
  const heavy = heavyRow!.id;
  const ids = await profileIds(sql, scope, heavy);
  const [heavyStats] = await sql<{ n: number; mid: string }[]>`
    select count(*)::int as n,
           (select id from events where scope = ${scope} and profile_id = ${heavy}
            order by id offset ${HEAVY_EVENTS / 2} limit 1) as mid
    from events where scope = ${scope} and profile_id = ${heavy}`;
  progress(`  heavy profile ${heavy}: ${heavyStats!.n} events`);
  const eventColumns =
    sql`id, event_type, profile_id, session_id, time_stamp, properties, flattened_properties, target, source`;
  const eventsFloor = (after?: string) =>
    sql<{ id: string }[]>`
      select ${eventColumns} from events
      where scope = ${scope} and profile_id = ${heavy}
        ${after === undefined ? sql`` : sql`and id > ${after}`}
      order by id limit 25`;
  for (const after of [undefined, heavyStats!.mid]) {
    add<{ list: { itemId: string }[] }, { id: string }[]>({
      name: `listProfileEvents heavy profile ${after === undefined ? "first page" : "keyset page"}`,
      group: "list",
      ours: () =>
        listProfileEvents(sql, scope, ids, {
          sort: "itemId.keyword:asc",
          limit: 25,
          offset: 0,
          after,
        }),
      // The answer carries totalSize (capped), so the floor counts too.
      floor: async () => {
        const rows = await eventsFloor(after);
        await sql`select count(*)::int from (
          select 1 from events where scope = ${scope} and profile_id = ${heavy} limit 10001) c`;
        return rows;
      },
      same: (a, b) => sameIds(a.list.map((e) => e.itemId), b.map((r) => r.id)),
    });
  }

  const rows: Row[] = [];
  for (const pair of pairs.filter((p) => GROUPS.has(p.group))) {
    if (runLeftMs() < 90_000) {
      invalid.push(`${store}: ${pair.name} skipped (run time bound)`);
      continue;
    }
    const row = await measure(pair);
    if (row.mismatch) invalid.push(`${store}: ${row.name}: answers differ (${row.mismatch})`);
    if (row.ours.length < Math.min(MIN_SAMPLES, ITERATIONS)) {
      invalid.push(`${store}: ${row.name}: too few samples`);
    }
    rows.push(row);
  }

  // HTTP count route (separate: auth, metering, rate limit, validation, read-only transaction)
  let http: PassResult["http"] = null;
  const libraryGold = rows.find((r) => r.name.startsWith("count profiles (b)"));
  if (libraryGold && GROUPS.has("count") && runLeftMs() > 90_000) {
    const route = await httpCountPair(sql, scope, TIER_GOLD);
    try {
      const expected = libraryGold.oursResult as number;
      const got = await route.request();
      if (got !== expected) invalid.push(`${store}: HTTP count ${got} vs library ${expected}`);
      for (let i = 1; i < WARMUP; i++) await route.request();
      const samples: number[] = [];
      const started = performance.now();
      for (let i = 0; i < ITERATIONS; i++) {
        if (i >= MIN_SAMPLES && performance.now() - started > OP_LIMIT_MS) break;
        samples.push((await timed(route.request, "HTTP count")).ms);
      }
      http = {
        name: "POST /cdp/query/profile/count (tier = gold), in-process app",
        p50: percentile(samples, 50),
        p99: percentile(samples, 99),
        libraryP50: libraryGold.oursP50,
        n: samples.length,
      };
      progress(
        `  ${http.name}: p50 ${http.p50.toFixed(2)} ms (library ${http.libraryP50.toFixed(2)})`,
      );
    } finally {
      await route.close();
    }
  }

  // export
  const exports: PassResult["exports"] = [];
  const memory: MemoryRow[] = [];
  const segments: Record<string, Segment> = {};
  for (const [key, condition] of [["all", MATCH_ALL], ["gold", TIER_GOLD]] as const) {
    await createSegment(sql, {
      scope,
      id: segmentId(scope, `bench ${key}`),
      name: `bench ${key}`,
      condition: segmentCondition(condition),
      now: NOW,
    });
    // As the route reads it: the stored condition round-tripped through json.
    segments[key] = (await getSegment(sql, scope, segmentId(scope, `bench ${key}`)))!;
  }
  let exportFailure: string | null = null;
  try {
    for (const key of GROUPS.has("export") ? ["all", "gold"] as const : []) {
      if (runLeftMs() < 90_000) {
        invalid.push(`${store}: export ${key} skipped (run time bound)`);
        continue;
      }
      const pageSize = 10_000;
      const exportPair: Pair<Drained, Drained> = {
        name: `export segment ${key === "all" ? "matchAll" : "tier = gold"} page ${pageSize}`,
        group: "export",
        ours: () => exportOurs(sql, segments[key]!, pageSize),
        floor: () => exportFloor(sql, scope, key === "gold", pageSize),
        same: (a, b) =>
          firstDiff([
            diffNumbers("lines", a.lines, b.lines),
            diffNumbers("bytes", a.bytes, b.bytes),
          ]),
        iterations: EXPORT_ITERATIONS,
        warmup: 3,
        callLimitMs: EXPORT_CALL_LIMIT_MS,
      };
      add(exportPair);
      const row = await measure(exportPair);
      if (row.mismatch) invalid.push(`${store}: ${row.name}: answers differ (${row.mismatch})`);
      rows.push(row);
      const lines = (row.oursResult as Drained).lines;
      exports.push({
        name: row.name,
        pageSize,
        lines,
        oursRowsPerSecond: lines / (row.oursP50 / 1000),
        floorRowsPerSecond: lines / (row.floorP50 / 1000),
        row,
      });
    }
    if (GROUPS.has("export") && runLeftMs() > 60_000) {
      progress(`${store}: export memory`);
      const byKey = new Map<string, MemoryRow>();
      for (let rep = 0; rep < MEMORY_REPS; rep++) {
        // Alternate the order so neither size always runs on a freshly collected heap.
        const sizes = rep % 2 === 0 ? [1000, 10_000] : [10_000, 1000];
        for (const pageSize of sizes) {
          for (const who of ["ours", "floor"] as const) {
            let lines = 0;
            const peak = await peakMemory(async (sample) => {
              const drained = await withTimeout(
                who === "ours"
                  ? exportOurs(sql, segments.all!, pageSize, sample)
                  : exportFloor(sql, scope, false, pageSize, sample),
                EXPORT_CALL_LIMIT_MS,
                `export memory ${who} page ${pageSize}`,
              );
              lines = drained.lines;
            });
            const live = collect === null ? NaN : await peakLiveHeap((sample) =>
              withTimeout(
                who === "ours"
                  ? exportOurs(sql, segments.all!, pageSize, sample)
                  : exportFloor(sql, scope, false, pageSize, sample),
                EXPORT_CALL_LIMIT_MS,
                `export live heap ${who} page ${pageSize}`,
              )
            );
            const key = `${who}/${pageSize}`;
            const entry = byKey.get(key) ??
              { who, pageSize, lines, rss: [], heap: [], live: [] };
            entry.rss.push(peak.rss);
            entry.heap.push(peak.heap);
            entry.live.push(live);
            byKey.set(key, entry);
          }
        }
      }
      memory.push(
        ...[...byKey.values()].sort((a, b) =>
          a.who === b.who ? a.pageSize - b.pageSize : a.who === "ours" ? -1 : 1
        ),
      );
    } else if (GROUPS.has("export")) {
      invalid.push(`${store}: export memory skipped (run time bound)`);
    }
  } catch (err) {
    // A stalled stream leaves its connection (and, embedded, the served session) stuck: the
    // rest of this store's export measurements cannot run.
    exportFailure = err instanceof Error ? err.message : String(err);
    progress(`  export FAILED: ${exportFailure}`);
    invalid.push(`${store}: export could not be measured: ${exportFailure}`);
  }
  let walk: WalkResult | null = null;
  if (GROUPS.has("walk") && exportFailure === null) {
    const id = segmentId(scope, "bench walk");
    await createSegment(sql, {
      scope,
      id,
      name: "bench walk",
      condition: segmentCondition(AGE_UNDER_37),
      now: NOW,
    });
    progress(`${store}: export walk of the age < 37 segment, 10,000-line pages`);
    walk = await exportWalk(sql, (await getSegment(sql, scope, id))!, scope);
    progress(
      `  ${walk.lines} lines in ${walk.pages} pages, ${walk.seconds.toFixed(1)} s; ttfb first ` +
        `${walk.ttfbMs[0]!.toFixed(0)} ms, last ${walk.ttfbMs.at(-1)!.toFixed(0)} ms; floor ` +
        `${walk.floorSeconds.toFixed(1)} s`,
    );
    if (walk.lines !== walk.floorLines) {
      invalid.push(`${store}: export walk ${walk.lines} lines, floor ${walk.floorLines}`);
    }
  }
  if (EXPLAIN_FILE && mode === "postgres" && exportFailure === null) {
    await explainAll(sql, pairs.filter((p) => !p.info), `${store}, ${scale.label}`);
  }
  return {
    store,
    scale,
    generationMs,
    rows,
    exports,
    memory,
    exportFailure,
    http,
    walk,
    invalid,
  };
}

// --- export walk ----------------------------------------------------------------------------

/** About 30% of the profiles: age is uniform in 18..80. */
const AGE_UNDER_37: Condition = {
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.age",
    comparisonOperator: "lessThan",
    propertyValueInteger: 37,
  },
};

/** A full export of a segment, page by page, as a client follows X-Next-Cursor. */
interface WalkResult {
  pages: number;
  lines: number;
  seconds: number;
  /** Time from asking for a page to its first bytes, per page. */
  ttfbMs: number[];
  floorLines: number;
  floorSeconds: number;
}

async function exportWalk(sql: Sql, segment: Segment, scope: string): Promise<WalkResult> {
  const ttfbMs: number[] = [];
  let lines = 0;
  let after: string | undefined;
  const started = performance.now();
  for (;;) {
    const asked = performance.now();
    const page = await openExport(sql, segment, {
      after,
      limit: 10_000,
      now: NOW,
      timeoutMs: 60_000,
    });
    let first = true;
    const drained = await drain(page.lines, () => {
      if (first) ttfbMs.push(performance.now() - asked);
      first = false;
    });
    if (first) ttfbMs.push(performance.now() - asked);
    lines += drained.lines;
    if (!page.more || page.lastId === null) break;
    after = page.lastId;
  }
  const seconds = (performance.now() - started) / 1000;
  // The floor: one statement reading the same rows in id order through a cursor.
  const floorStarted = performance.now();
  const encoder = new TextEncoder();
  const cursor = sql<{
    item_id: string;
    provenance: string;
    properties: Record<string, unknown>;
    first_visit: Date | null;
    last_visit: Date | null;
  }[]>`
    select item_id, provenance, properties, first_visit, last_visit from profiles
    where scope = ${scope} and (properties ->> 'age')::numeric < 37
    order by item_id`.cursor(1000);
  async function* chunks() {
    for await (const rows of cursor) {
      yield encoder.encode(rows.map((row) => JSON.stringify(exportLine(row)) + "\n").join(""));
    }
  }
  const floor = await drain(chunks());
  return {
    pages: ttfbMs.length,
    lines,
    seconds,
    ttfbMs,
    floorLines: floor.lines,
    floorSeconds: (performance.now() - floorStarted) / 1000,
  };
}

// --- EXPLAIN (BENCH_EXPLAIN=<file>, PostgreSQL only) ------------------------------------------

interface Captured {
  query: string;
  parameters: unknown[];
  types: number[];
}

/** Statements the driver sends while a capture is open (the postgres `debug` hook). */
let _captured: Captured[] | null = null;

function captureStatement(
  _connection: number,
  query: string,
  parameters: unknown[],
  types: unknown[],
): void {
  _captured?.push({ query, parameters: [...parameters], types: types.map(Number) });
}

/** A bound value as an SQL literal for EXECUTE (quoted; arrays as array literals). */
function literal(value: unknown): string {
  const quote = (text: string) => `'${text.replaceAll("'", "''")}'`;
  if (value === null || value === undefined) return "null";
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  if (typeof value === "boolean") return String(value);
  if (value instanceof Date) return quote(value.toISOString());
  if (Array.isArray(value)) {
    const element = (v: unknown) =>
      `"${String(v).replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
    return quote(`{${value.map(element).join(",")}}`);
  }
  if (typeof value === "object") return quote(JSON.stringify(value));
  return quote(String(value));
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of one captured statement as the driver runs it: prepared with the
 * driver's parameter types and executed 6 times first, so the plan cache has made the choice
 * (custom or generic plan) that the measured iterations saw.
 */
async function explainStatement(sql: Sql, statement: Captured): Promise<string> {
  // A cursor's query is explained as a plain query (planned for all rows, not the cursor's
  // first fraction); transaction control, MOVE and FETCH have no plan.
  const query = statement.query.trim().replace(
    /^declare\s+\w+\s+(?:scroll\s+)?cursor\s+for\s+/i,
    "",
  );
  if (!/^(select|with)\b/i.test(query)) return "(no plan: not a query)";
  const conn = await sql.reserve();
  try {
    const names: string[] = [];
    for (const oid of statement.types) {
      names.push(
        oid
          ? (await conn<{ t: string }[]>`select format_type(${oid}::oid, null) as t`)[0]!.t
          : "unknown",
      );
    }
    const declared = names.length > 0 ? `(${names.join(", ")})` : "";
    const args = statement.parameters.length > 0
      ? `(${statement.parameters.map(literal).join(", ")})`
      : "";
    await conn.unsafe(`prepare bench_explain${declared} as ${query}`);
    try {
      for (let i = 0; i < 6; i++) await conn.unsafe(`execute bench_explain${args}`);
      const plan = await conn.unsafe(`explain (analyze, buffers) execute bench_explain${args}`);
      return plan.map((row) => row["QUERY PLAN"]).join("\n");
    } finally {
      await conn.unsafe("deallocate bench_explain");
    }
  } finally {
    conn.release();
  }
}

/** Captures the statements of one call of each side and appends their plans to EXPLAIN_FILE. */
async function explainAll(
  sql: Sql,
  pairs: { name: string; ours: () => Promise<unknown>; floor: () => Promise<unknown> }[],
  title: string,
): Promise<void> {
  const out: string[] = [`# EXPLAIN (ANALYZE, BUFFERS): ${title}`, ""];
  for (const pair of pairs) {
    if (runLeftMs() < 60_000) {
      out.push(`(stopped: run time bound)`);
      break;
    }
    progress(`  explain: ${pair.name}`);
    out.push(`## ${pair.name}`, "");
    for (const side of ["ours", "floor"] as const) {
      _captured = [];
      try {
        await (side === "ours" ? pair.ours() : pair.floor());
      } finally {
        const statements = _captured;
        _captured = null;
        for (const [i, statement] of statements.entries()) {
          out.push(
            `### ${side}, statement ${i + 1} of ${statements.length}`,
            "",
            "```sql",
            statement.query.replace(/\n\s*\n/g, "\n").trim(),
            `-- parameters: ${statement.parameters.map(literal).join(", ")}`,
            "```",
            "",
            "```",
            await explainStatement(sql, statement),
            "```",
            "",
          );
        }
      }
    }
  }
  await Deno.writeTextFile(EXPLAIN_FILE!, out.join("\n") + "\n", { append: true });
  progress(`plans appended to ${EXPLAIN_FILE}`);
}

// --- report ---------------------------------------------------------------------------------

function ms(value: number): string {
  if (!Number.isFinite(value)) return "n/a";
  return value >= 100
    ? `${value.toFixed(0)} ms`
    : value >= 10
    ? `${value.toFixed(1)} ms`
    : `${value.toFixed(2)} ms`;
}

function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** The ratio to the floor a row must stay within: tighter for the plain counts. */
function _ratioTarget(name: string): number {
  return name.startsWith("count profiles (a)") || name.startsWith("count profiles (b)")
    ? COUNT_RATIO_TARGET
    : RATIO_TARGET;
}

interface Verdict {
  store: string;
  target: string;
  value: string;
  /** null: informational, not a target. */
  pass: boolean | null;
  note?: string;
}

function report(pass: PassResult): { text: string; verdicts: Verdict[] } {
  const out: string[] = [];
  const verdicts: Verdict[] = [];
  const postgresStore = pass.store === "PostgreSQL";
  const s = pass.scale;
  out.push(
    `### ${pass.store}, ${s.label}: brand A ${s.profilesA.toLocaleString("en")} profiles / ${
      s.eventsA.toLocaleString("en")
    } events, brand B ${s.profilesB.toLocaleString("en")} / ${s.eventsB.toLocaleString("en")}`,
  );
  out.push("");
  out.push(
    `Data generation (excluded from results): ${(pass.generationMs / 1000).toFixed(1)} s. ` +
      `${ITERATIONS} iterations after ${WARMUP} warm-ups (export: ${EXPORT_ITERATIONS} after 3), ` +
      "sides alternating; with 50 samples or fewer, p99 is the maximum.",
  );
  out.push("");
  out.push(
    "| operation | ours p50 | ours p99 | floor p50 | floor p99 | ours/floor p50 | n | within 2x (1.5x: counts a, b) | p50 < 100 ms |",
  );
  out.push("| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: | :---: |");
  for (const row of pass.rows) {
    const target = _ratioTarget(row.name);
    const within = row.info ? null : row.ratio <= target;
    const latencyApplies = row.group === "count" || row.group === "metrics";
    const fast = latencyApplies && postgresStore ? row.oursP50 < LATENCY_TARGET_MS : null;
    if (within !== null) {
      verdicts.push({
        store: pass.store,
        target: `${row.name}: within ${target}x of floor at p50`,
        value: `x${row.ratio.toFixed(2)}`,
        pass: within,
      });
    }
    if (fast !== null) {
      verdicts.push({
        store: pass.store,
        target: `${row.name}: p50 under ${LATENCY_TARGET_MS} ms`,
        value: ms(row.oursP50),
        pass: fast,
      });
    }
    const mark = (v: boolean | null, na: string) => v === null ? na : v ? "PASS" : "**FAIL**";
    out.push(
      `| ${row.name}${row.mismatch ? ` (answers differ: ${row.mismatch})` : ""} | ${
        ms(row.oursP50)
      } | ${ms(row.oursP99)} | ${ms(row.floorP50)} | ${ms(row.floorP99)} | x${
        row.ratio.toFixed(2)
      } | ${row.ours.length}${row.truncated ? " (cut)" : ""} | ${mark(within, "info")} | ${
        mark(fast, latencyApplies ? "n/a (embedded)" : "")
      } |`,
    );
  }
  out.push("");
  if (pass.http) {
    out.push(
      `HTTP, reported apart: ${pass.http.name}: p50 ${ms(pass.http.p50)}, p99 ${
        ms(pass.http.p99)
      } (n=${pass.http.n}); the library call alone: p50 ${ms(pass.http.libraryP50)}.`,
    );
    out.push("");
  }
  if (pass.walk) {
    const w = pass.walk;
    const rate = w.lines / w.seconds;
    const first = w.ttfbMs[0]!;
    const last = w.ttfbMs.at(-1)!;
    // The last page can be short: compare it with the first page, whose work it repeats.
    out.push(
      `Export walk (segment age < 37, 10,000-line pages, cursor followed to the end): ${w.lines} ` +
        `lines in ${w.pages} pages, ${w.seconds.toFixed(1)} s (${Math.round(rate)} rows/s); ` +
        `floor (one cursor over the same rows) ${w.floorSeconds.toFixed(1)} s ` +
        `(${Math.round(w.floorLines / w.floorSeconds)} rows/s). Time to first byte: first page ` +
        `${ms(first)}, median ${ms(median(w.ttfbMs))}, last ${ms(last)}, max ${
          ms(Math.max(...w.ttfbMs))
        }.`,
      "",
    );
    verdicts.push({
      store: pass.store,
      target: `export walk at least ${EXPORT_ROWS_PER_SECOND_TARGET} rows/s`,
      value: `${Math.round(rate)} rows/s`,
      pass: rate >= EXPORT_ROWS_PER_SECOND_TARGET,
    });
    verdicts.push({
      store: pass.store,
      target: "export walk: last page's time to first byte at most 2x the first's",
      value: `${ms(last)} vs ${ms(first)}`,
      pass: last <= 2 * first,
    });
  }
  out.push("| export (10,000-line page) | lines | ours rows/s | floor rows/s | ≥ 50,000 rows/s |");
  out.push("| --- | ---: | ---: | ---: | :---: |");
  for (const e of pass.exports) {
    const ok = e.oursRowsPerSecond >= EXPORT_ROWS_PER_SECOND_TARGET;
    verdicts.push({
      store: pass.store,
      target: `${e.name}: at least ${EXPORT_ROWS_PER_SECOND_TARGET} rows/s`,
      value: `${Math.round(e.oursRowsPerSecond)} rows/s`,
      pass: ok,
    });
    out.push(
      `| ${e.name} | ${e.lines} | ${Math.round(e.oursRowsPerSecond).toLocaleString("en")} | ${
        Math.round(e.floorRowsPerSecond).toLocaleString("en")
      } | ${ok ? "PASS" : "**FAIL**"} |`,
    );
  }
  if (pass.exportFailure) {
    out.push(`| export stalled: ${pass.exportFailure} | - | 0 | - | **FAIL** |`);
    verdicts.push({
      store: pass.store,
      target: `export at least ${EXPORT_ROWS_PER_SECOND_TARGET} rows/s, memory flat in page size`,
      value: `stalled: ${pass.exportFailure}`,
      pass: false,
    });
  }
  out.push("");
  if (pass.memory.length > 0) {
    out.push(
      `| export memory, matchAll (peak above the level before the page; median and max of ${MEMORY_REPS} runs) | lines | rss | heapUsed, sampled every ${MEMORY_SAMPLE_MS} ms | live heap (after a full GC per chunk) |`,
    );
    out.push("| --- | ---: | ---: | ---: | ---: |");
    const both = (values: number[]) =>
      values.some(Number.isNaN) ? "n/a" : `${mb(median(values))} / ${mb(Math.max(...values))}`;
    for (const m of pass.memory) {
      out.push(
        `| ${m.who} page ${m.pageSize} | ${m.lines} | ${both(m.rss)} | ${both(m.heap)} | ${
          both(m.live)
        } |`,
      );
    }
    out.push("");
    out.push(
      "rss and heapUsed sampled without forcing a collection include garbage the young " +
        "generation has not scavenged yet (and the new space V8 commits for it), so they grow " +
        "with the bytes a page allocates whatever the stream retains: the floor, a " +
        "`.cursor(1000)` stream by construction, grows alike. The live heap (heapUsed after a " +
        "full collection at every chunk) measures retention and decides the target; rss and " +
        "heapUsed are shown for information, with the floor's for comparison.",
    );
    out.push("");
    const find = (who: string, size: number) =>
      pass.memory.find((m) => m.who === who && m.pageSize === size);
    const small = find("ours", 1000);
    const large = find("ours", 10_000);
    if (small && large) {
      for (const metric of ["live", "rss", "heap"] as const) {
        const a = median(small[metric]);
        const b = median(large[metric]);
        if (Number.isNaN(a) || Number.isNaN(b)) continue;
        const flat = b <= MEMORY_RATIO_TARGET * a || b - a <= MEMORY_NOISE_BYTES;
        const label = { live: "live heap", rss: "rss (info)", heap: "heapUsed as sampled (info)" }[
          metric
        ];
        const floorSmall = find("floor", 1000);
        const floorLarge = find("floor", 10_000);
        const floorText = floorSmall && floorLarge
          ? `; floor ${mb(median(floorLarge[metric]))} vs ${mb(median(floorSmall[metric]))}`
          : "";
        verdicts.push({
          store: pass.store,
          target: `export memory flat in page size (${label}: median peak at 10,000 ≤ 2x ` +
            `the one at 1,000, or within ${mb(MEMORY_NOISE_BYTES)})`,
          value: `${mb(b)} vs ${mb(a)}${metric === "live" ? "" : floorText}`,
          pass: metric === "live" ? flat : null,
          ...(metric === "live" ? {} : { note: flat ? "flat" : "grows" }),
        });
      }
    }
  }
  const mine = verdicts.filter((v) => v.store === pass.store);
  out.push("| target | value | result |");
  out.push("| --- | --- | :---: |");
  for (const v of mine) {
    const result = v.pass === null ? `info (${v.note})` : v.pass ? "PASS" : "**FAIL**";
    out.push(`| ${v.target} | ${v.value} | ${result} |`);
  }
  out.push("");
  return { text: out.join("\n"), verdicts };
}

// --- main -----------------------------------------------------------------------------------

async function postgresPass(): Promise<PassResult | null> {
  assertLoopback(PG_URL);
  const admin = postgres(PG_URL, { onnotice: () => {}, max: 1 });
  onCleanup("admin connection", () => admin.end({ timeout: 5 }));
  try {
    await admin`select 1`;
  } catch (err) {
    progress(`PostgreSQL at ${PG_URL} does not answer (${err}); skipping that pass`);
    return null;
  }
  const [info] = await admin<{ version: string; jit: string; workers: string }[]>`
    select version() as version, current_setting('jit') as jit,
           current_setting('max_parallel_workers_per_gather') as workers`;
  progress(`${info!.version}; jit=${info!.jit}; parallel workers/gather=${info!.workers}`);
  const name = REUSE_DATABASE ??
    `bench_engine_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  if (!/^bench_engine_[a-z0-9_]+$/.test(name)) {
    throw new Error("BENCH_REUSE_DATABASE must match bench_engine_[a-z0-9_]+");
  }
  const [exists] = await admin`select 1 from pg_database where datname = ${name}`;
  if (!exists) await admin`create database ${admin(name)}`;
  if (REUSE_DATABASE) {
    progress(`BENCH_REUSE_DATABASE: ${name} is kept; drop it with: dropdb --force ${name}`);
  } else if (KEEP_DATABASE) {
    progress(`BENCH_KEEP_DATABASE=1: ${name} is kept; drop it with: dropdb --force ${name}`);
  } else {
    onCleanup(`drop database ${name}`, async () => {
      await admin`drop database if exists ${admin(name)} with (force)`;
    });
  }
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  const sql = postgres(url.toString(), {
    onnotice: () => {},
    max: 4,
    connection: { application_name: "engine_load", statement_timeout: 120_000 },
    debug: captureStatement,
  });
  const closeSql = onCleanup(`close ${name}`, () => sql.end({ timeout: 5 }));
  try {
    return await runPass(sql, "PostgreSQL", FULL);
  } finally {
    await closeSql();
  }
}

async function pglitePass(): Promise<PassResult> {
  const dir = await tempDir("engine_load_pglite_");
  progress("PGlite: opening (initdb)");
  const db = await openDatabase({ dataDir: dir, serve: true, max: 4 });
  const close = onCleanup("close PGlite", () => db.close());
  try {
    return await runPass(db.sql, "embedded PGlite", REDUCED);
  } finally {
    await close();
  }
}

/** The commit measured, `+dirty` when tracked files differ from it; "unknown" without git. */
async function revision(): Promise<string> {
  const git = async (...args: string[]) => {
    const out = await new Deno.Command("git", { args, cwd: ROOT, stdout: "piped", stderr: "null" })
      .output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : null;
  };
  try {
    const head = await git("rev-parse", "--short", "HEAD");
    const dirty = await git("status", "--porcelain", "--untracked-files=no");
    return head ? `${head}${dirty ? "+dirty" : ""}` : "unknown";
  } catch {
    return "unknown";
  }
}

async function main(): Promise<number> {
  const commit = await revision();
  const [l1, l5] = Deno.loadavg();
  progress(
    `commit ${commit}; Deno ${Deno.version.deno}; ${navigator.hardwareConcurrency} cores; load average ${
      l1?.toFixed(2)
    } / ${
      l5?.toFixed(2)
    }; ${ITERATIONS} iterations after ${WARMUP} warm-ups; now = ${NOW.toISOString()}`,
  );
  const passes: PassResult[] = [];
  if (RUN_POSTGRES) {
    const pg = await postgresPass();
    if (pg) passes.push(pg);
  }
  if (RUN_PGLITE) {
    if (runLeftMs() > 120_000) passes.push(await pglitePass());
    else progress("PGlite pass skipped: run time bound");
  }
  const invalid = passes.flatMap((p) => p.invalid);
  const verdicts: Verdict[] = [];
  const out: string[] = [
    `## Read-side engine load (${
      new Date().toISOString().slice(0, 10)
    }, commit ${commit}, Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores)`,
    "",
    "Ours = the lib/engine function as the routes call it (segments stored as the routes store " +
    "them), floor = hand-written SQL for the same answer, same driver and database, same run. " +
    "Both answers are compared once per operation.",
    "",
  ];
  for (const pass of passes) {
    const { text, verdicts: v } = report(pass);
    out.push(text);
    verdicts.push(...v);
  }
  if (invalid.length > 0) {
    out.push("**Invalid run:**");
    for (const why of invalid) out.push(`- ${why}`);
    out.push("");
  }
  const failed = verdicts.filter((v) => v.pass === false);
  const passed = verdicts.filter((v) => v.pass === true);
  out.push(
    `Targets: ${passed.length} PASS, ${failed.length} FAIL` +
      (failed.length ? `: ${failed.map((v) => `${v.store}: ${v.target}`).join("; ")}` : ""),
  );
  console.log(out.join("\n"));
  console.log(JSON.stringify({
    bench: "engine_load",
    valid: invalid.length === 0,
    invalid,
    commit,
    config: { iterations: ITERATIONS, warmup: WARMUP, exportIterations: EXPORT_ITERATIONS },
    passes: passes.map((p) => ({
      store: p.store,
      scale: p.scale,
      generationSeconds: +(p.generationMs / 1000).toFixed(1),
      operations: p.rows.map((r) => ({
        name: r.name,
        info: r.info,
        n: r.ours.length,
        oursP50Ms: +r.oursP50.toFixed(3),
        oursP99Ms: +r.oursP99.toFixed(3),
        floorP50Ms: +r.floorP50.toFixed(3),
        floorP99Ms: +r.floorP99.toFixed(3),
        ratio: +r.ratio.toFixed(3),
        mismatch: r.mismatch,
      })),
      exports: p.exports.map((e) => ({
        name: e.name,
        lines: e.lines,
        oursRowsPerSecond: Math.round(e.oursRowsPerSecond),
        floorRowsPerSecond: Math.round(e.floorRowsPerSecond),
      })),
      memory: p.memory.map((m) => ({
        who: m.who,
        pageSize: m.pageSize,
        rssMedianBytes: median(m.rss),
        heapMedianBytes: median(m.heap),
        liveHeapMedianBytes: median(m.live),
      })),
      http: p.http,
      walk: p.walk && {
        pages: p.walk.pages,
        lines: p.walk.lines,
        rowsPerSecond: Math.round(p.walk.lines / p.walk.seconds),
        floorRowsPerSecond: Math.round(p.walk.floorLines / p.walk.floorSeconds),
        ttfbFirstMs: +p.walk.ttfbMs[0]!.toFixed(1),
        ttfbLastMs: +p.walk.ttfbMs.at(-1)!.toFixed(1),
        ttfbMaxMs: +Math.max(...p.walk.ttfbMs).toFixed(1),
      },
    })),
    targets: verdicts.map((v) => ({
      ...v,
      result: v.pass === null ? "info" : v.pass ? "PASS" : "FAIL",
    })),
    seconds: Math.round((performance.now() - STARTED) / 1000),
  }));
  return invalid.length > 0 ? 1 : 0;
}

let code = 1;
const interrupt = () => {
  progress("interrupted: cleaning up");
  cleanupAll().finally(() => Deno.exit(130));
};
Deno.addSignalListener("SIGINT", interrupt);
Deno.addSignalListener("SIGTERM", interrupt);
const runTimer = setTimeout(() => {
  progress("run time bound exceeded: cleaning up");
  cleanupAll().finally(() => Deno.exit(1));
}, RUN_LIMIT_MS + 60_000);
try {
  code = await main();
} catch (err) {
  console.error(`[engine_load] failed: ${err instanceof Error ? err.stack : err}`);
} finally {
  clearTimeout(runTimer);
  progress("cleaning up");
  await cleanupAll();
}
progress(`done in ${((performance.now() - STARTED) / 1000).toFixed(0)} s`);
Deno.exit(code);
