/**
 * Audiences benchmark: the cost of keeping segment membership, in one run on PostgreSQL.
 *
 *   deno task bench:audiences      (deno run -A --unstable-kv bench/audiences_load.ts)
 *
 * 1. Forwarder: a brand with 20 segments (visit counts, identity properties, date math on `now`,
 *    `pastEventCondition` windows); the forwarder (`createQueueHandler`, default settings)
 *    drains a KV queue holding BENCH_FORWARD_EVENTS realistic events (ten per profile and
 *    session), without and with membership (its hook and jobs, lib/audiences, as lib/runtime
 *    wires them; the clock stops when the last membership update is written), alternated
 *    BENCH_ROUNDS times each on fresh profiles, after a warm-up run and with the tables
 *    analyzed before each (as autovacuum keeps them). The floor, without membership, runs in a
 *    process of its own (this file with BENCH_AUDIENCES_FORWARDER_FLOOR set: the same forwarder
 *    and workload, after an uncounted warm-up of its own), alternated with ours. Target: the
 *    median events/s with membership at least 80% of the median without.
 * 2. Sweep: BENCH_SWEEP_PROFILES (1,000,000) profiles of one brand with 20 segments, 6 of them
 *    time-driven, members filled by a first sweep (timed, for information); then the clock moves
 *    a day and the sweep runs again (`sweepTimeDriven`: each time-driven segment evaluated over
 *    the whole brand and its diff written). Target: under 60 s. Floor: the simplest evaluation
 *    of the same conditions, one `count(*)` each over the brand, in a process of its own (this
 *    file with BENCH_AUDIENCES_FLOOR set).
 *
 * Prints progress on stderr, then a markdown table and one JSON line on stdout; targets are
 * reported PASS/FAIL, never asserted. Exit code 1 only when the run is invalid (an error).
 *
 * Environment (all optional): BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test;
 * an admin connection that creates and drops a scratch database), BENCH_FORWARD_EVENTS (20000),
 * BENCH_ROUNDS (5), BENCH_SWEEP_PROFILES (1000000), BENCH_PARTS (`forwarder,sweep`).
 *
 * @module
 */
import postgres from "postgres";
import { monotonicFactory } from "ulid";
import { membershipForwarding } from "../lib/audiences/jobs.ts";
import { movesWithTime, sweepTimeDriven } from "../lib/audiences/time_driven.ts";
import { segmentCondition, storedCondition } from "../lib/engine/caller_condition.ts";
import { compileCondition, type Condition } from "../lib/engine/conditions.ts";
import { createEmbeddedEngine } from "../lib/engine/embedded.ts";
import type { EventBatch } from "../lib/engine/engine.ts";
import { EVENT_REGISTRY_VERSION } from "../lib/engine/event_types.ts";
import { createSegment } from "../lib/engine/segments.ts";
import { createQueueHandler } from "../lib/ingest/forwarder.ts";
import { createKvQueue, readBacklog } from "../lib/ingest/queue.ts";
import { membershipDeps } from "../lib/runtime/runtime.ts";
import { connectPostgres, type Sql } from "../lib/store/db.ts";
import { migrate } from "../lib/store/migrations.ts";
import { intEnv } from "./bench_support.ts";
import { makeBatches } from "./ingest_workload.ts";

const PG_URL = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const FORWARD_EVENTS = intEnv("BENCH_FORWARD_EVENTS", 20_000);
const ROUNDS = intEnv("BENCH_ROUNDS", 5);
const SWEEP_PROFILES = intEnv("BENCH_SWEEP_PROFILES", 1_000_000);
const PARTS = new Set((Deno.env.get("BENCH_PARTS") ?? "forwarder,sweep").split(","));
/** Membership's events/s as a share (%) of the forwarder's without it. */
const FORWARDER_SHARE_TARGET = 80;
const SWEEP_TARGET_SECONDS = 60;
const SEGMENTS = 20;
const DAY = 86_400_000;
const newId = monotonicFactory();

function progress(message: string): void {
  console.error(`[audiences] ${message}`);
}

const property = (name: string, op: string, value: Record<string, unknown> = {}): Condition => ({
  type: "profilePropertyCondition",
  parameterValues: { propertyName: name, comparisonOperator: op, ...value },
});

const pastPageViews = (days: number, min: number): Condition => ({
  type: "pastEventCondition",
  parameterValues: {
    eventCondition: { type: "eventTypeCondition", parameterValues: { eventTypeId: "page_viewed" } },
    numberOfDays: days,
    minimumEventCount: min,
  },
});

/** The brand's 20 segments: 6 move with time (date math, event windows), 14 do not. */
function segmentConditions(): Condition[] {
  const conditions: Condition[] = [
    property("properties.lastVisit", "greaterThan", { propertyValueDateExpr: "now-7d" }),
    property("properties.lastVisit", "greaterThan", { propertyValueDateExpr: "now-30d" }),
    property("properties.lastVisit", "lessThan", { propertyValueDateExpr: "now-90d" }),
    property("properties.firstVisit", "greaterThan", { propertyValueDateExpr: "now-14d" }),
    pastPageViews(30, 1),
    pastPageViews(7, 3),
  ];
  for (let n = 1; conditions.length < SEGMENTS - 4; n++) {
    conditions.push(
      property("properties.nbOfVisits", "greaterThanOrEqualTo", { propertyValueInteger: n }),
    );
  }
  conditions.push(
    property("properties.email", "exists"),
    property("properties.age", "greaterThanOrEqualTo", { propertyValueInteger: 40 }),
    property("properties.country", "equals", { propertyValue: "FR" }),
    property("itemId", "startsWith", { propertyValue: "bench_1" }),
  );
  return conditions;
}

async function defineSegments(sql: Sql, scope: string, now: Date): Promise<void> {
  for (const [i, condition] of segmentConditions().entries()) {
    await createSegment(sql, {
      scope,
      id: `seg__${scope}__s${i}`,
      name: `Segment ${i}`,
      condition: segmentCondition(condition),
      now,
    });
  }
}

// --- forwarder --------------------------------------------------------------------------------

/** The forwarder draining a KV queue that holds `batches`; events/s from its start to empty. */
async function drain(
  sql: Sql,
  batches: EventBatch[],
  withMembership: boolean,
): Promise<number> {
  const kv = await Deno.openKv(":memory:");
  try {
    const queue = createKvQueue(kv, { newId });
    for (const batch of batches) {
      await queue.accept({
        brandId: "bench",
        batch: { ...batch, checked: EVENT_REGISTRY_VERSION },
      });
    }
    const now = () => new Date();
    const engine = createEmbeddedEngine({ sql, now });
    const membership = membershipForwarding(
      membershipDeps({ sql, config: { queryTimeoutMs: 10_000 }, now }),
      queue,
    );
    const handle = createQueueHandler({
      queue,
      engine,
      now,
      ...(withMembership ? { afterApply: membership.afterApply, jobs: membership.jobs } : {}),
    });
    const listening = kv.listenQueue(handle);
    const started = performance.now();
    while ((await readBacklog(kv)) > 0) await new Promise((r) => setTimeout(r, 20));
    // The clock stops once every event is applied and the membership updates of every group
    // are written (a group leaves the backlog once its hook has started them): membership's
    // work is counted, not left behind.
    await membership.settled();
    const seconds = (performance.now() - started) / 1000;
    kv.close();
    await listening;
    return batches.reduce((n, b) => n + b.events.length, 0) / seconds;
  } finally {
    try {
      kv.close();
    } catch { /* closed */ }
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const FORWARD_SCOPE = "fwd.myshopify.com";
/** Uncounted events the floor's process drains first: the driver's process is warm by then. */
const FLOOR_WARM_EVENTS = 2_000;

/**
 * The floor in a process of its own: the forwarder without membership draining one round's
 * workload (this file with BENCH_AUDIENCES_FORWARDER_FLOOR set); answers its events/s.
 */
async function runForwarderFloor(url: string, run: string): Promise<number> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", new URL(import.meta.url).pathname],
    env: { BENCH_AUDIENCES_FORWARDER_FLOOR: url, BENCH_AUDIENCES_RUN: run },
    stdout: "piped",
    stderr: "inherit",
  });
  const output = await child.output();
  if (!output.success) throw new Error("forwarder floor process failed");
  const line = new TextDecoder().decode(output.stdout).trim().split("\n").pop()!;
  return JSON.parse(line).eventsPerSecond;
}

/** BENCH_AUDIENCES_FORWARDER_FLOOR: drain `run`'s workload without membership; JSON on stdout. */
async function forwarderFloorProcess(url: string, run: string): Promise<void> {
  const sql = connectPostgres(url, 10);
  try {
    await drain(
      sql,
      makeBatches(FORWARD_SCOPE, FLOOR_WARM_EVENTS, "realistic", `${run}w`, newId),
      false,
    );
    await sql`analyze`;
    const batches = makeBatches(FORWARD_SCOPE, FORWARD_EVENTS, "realistic", run, newId);
    console.log(JSON.stringify({ eventsPerSecond: await drain(sql, batches, false) }));
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function benchForwarder(sql: Sql, url: string) {
  const scope = FORWARD_SCOPE;
  await defineSegments(sql, scope, new Date());
  // A brand with history whose statistics are current, as autovacuum (or, on PGlite, the
  // service's statistics refresh) keeps them: on a fresh database the planner takes the empty
  // events table for small and probes a profile's history by scanning it.
  await drain(sql, makeBatches(scope, FORWARD_EVENTS, "realistic", "bench_warm", newId), true);
  const without: number[] = [];
  const withMembership: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (const membership of [false, true]) {
      const run = `bench_r${round}${membership ? "m" : "p"}`;
      let rate: number;
      if (membership) {
        await sql`analyze`;
        rate = await drain(sql, makeBatches(scope, FORWARD_EVENTS, "realistic", run, newId), true);
        withMembership.push(rate);
      } else {
        rate = await runForwarderFloor(url, run);
        without.push(rate);
      }
      progress(
        `forwarder round ${round + 1}, membership ${membership}: ${rate.toFixed(0)} events/s` +
          (membership ? "" : " (own process)"),
      );
    }
  }
  const [changes] = await sql<{ n: number }[]>`
    select count(*)::int as n from segment_changes where scope = ${scope}`;
  const share = 100 * median(withMembership) / median(without);
  return {
    withoutEventsPerSecond: median(without),
    withEventsPerSecond: median(withMembership),
    runsWithout: without.map(Math.round),
    runsWith: withMembership.map(Math.round),
    sharePercent: share,
    membershipChanges: changes!.n,
    pass: share >= FORWARDER_SHARE_TARGET,
  };
}

// --- sweep ------------------------------------------------------------------------------------

const SWEEP_SCOPE = "sweep.myshopify.com";

/** The brand's profiles, spread over 120 days of visits, and a page view for a fifth of them. */
async function seedProfiles(sql: Sql, count: number, now: Date): Promise<void> {
  await sql`
    insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                          nb_of_visits, created_at, updated_at)
    select ${SWEEP_SCOPE}, 'bench_' || g,
           jsonb_build_object('age', g % 80, 'country', case when g % 5 = 0 then 'FR' else 'US' end)
             || case when g % 3 = 0 then jsonb_build_object('email', 'p' || g || '@example.com')
                     else '{}'::jsonb end,
           'server',
           ${now}::timestamptz - ((g % 120) + 10) * interval '1 day',
           ${now}::timestamptz - (g % 120) * interval '1 day' - (g % 86400) * interval '1 second',
           1 + g % 12, ${now}, ${now}
    from generate_series(1, ${count}) as g`;
  await sql`
    insert into events (scope, id, profile_id, session_id, event_type, time_stamp, source,
                        received_at)
    select ${SWEEP_SCOPE}, 'e' || g || '_' || k, 'bench_' || g, 's' || g, 'page_viewed',
           ${now}::timestamptz - ((g + k) % 40) * interval '1 day', 'server', ${now}
    from generate_series(5, ${count}, 5) as g, generate_series(1, 3) as k`;
  await sql`analyze profiles`;
  await sql`analyze events`;
}

/** The floor in a process of its own: each time-driven condition counted over the brand. */
async function runFloor(url: string, at: Date): Promise<number> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", new URL(import.meta.url).pathname],
    env: { BENCH_AUDIENCES_FLOOR: url, BENCH_AUDIENCES_FLOOR_AT: at.toISOString() },
    stdout: "piped",
    stderr: "inherit",
  });
  const output = await child.output();
  if (!output.success) throw new Error("floor process failed");
  return JSON.parse(new TextDecoder().decode(output.stdout).trim().split("\n").pop()!).seconds;
}

/** BENCH_AUDIENCES_FLOOR: count the members of each time-driven segment, one after another. */
async function floorProcess(url: string, at: Date): Promise<void> {
  const sql = connectPostgres(url, 1);
  try {
    const segments = await sql<{ condition: Condition }[]>`
      select condition from segments where scope = ${SWEEP_SCOPE} order by id`;
    const moving = segments.filter((s) => movesWithTime(s.condition, at));
    const started = performance.now();
    for (const segment of moving) {
      const tree = storedCondition(segment.condition, at).tree;
      const holds = compileCondition(sql, tree, { itemType: "profile", scope: SWEEP_SCOPE });
      await sql`select count(*) from profiles p where p.scope = ${SWEEP_SCOPE} and ${holds}`;
    }
    console.log(JSON.stringify({ seconds: (performance.now() - started) / 1000 }));
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function benchSweep(sql: Sql, url: string) {
  let clock = new Date();
  // The sweep covers every brand: only this part's brand keeps segments.
  await sql`delete from segments where scope <> ${SWEEP_SCOPE}`;
  progress(`sweep: seeding ${SWEEP_PROFILES} profiles`);
  await seedProfiles(sql, SWEEP_PROFILES, clock);
  await defineSegments(sql, SWEEP_SCOPE, clock);
  const deps = membershipDeps({ sql, config: { queryTimeoutMs: 10_000 }, now: () => clock });
  const fill = performance.now();
  const filled = await sweepTimeDriven({ ...deps, refreshTimeoutMs: 600_000 });
  const fillSeconds = (performance.now() - fill) / 1000;
  progress(`sweep: first fill ${fillSeconds.toFixed(1)} s (${filled.entered} entered)`);
  await sql`vacuum analyze segment_members`;
  clock = new Date(clock.getTime() + DAY);
  const started = performance.now();
  const swept = await sweepTimeDriven(deps);
  const seconds = (performance.now() - started) / 1000;
  progress(`sweep: ${seconds.toFixed(1)} s, ${swept.entered} entered, ${swept.exited} exited`);
  const floorSeconds = await runFloor(url, clock);
  return {
    profiles: SWEEP_PROFILES,
    timeDrivenSegments: swept.segments,
    failed: swept.failed,
    entered: swept.entered,
    exited: swept.exited,
    seconds,
    fillSeconds,
    floorSeconds,
    pass: swept.failed === 0 && seconds < SWEEP_TARGET_SECONDS,
  };
}

async function main(): Promise<number> {
  const admin = postgres(PG_URL, { onnotice: () => {}, max: 1 });
  const name = `bench_audiences_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin`create database ${admin(name)}`;
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  const sql = connectPostgres(url.toString(), 10);
  try {
    await migrate(sql);
    const forwarder = PARTS.has("forwarder") ? await benchForwarder(sql, url.toString()) : null;
    const sweep = PARTS.has("sweep") ? await benchSweep(sql, url.toString()) : null;
    const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
    console.log("| figure | ours | floor | target | result |");
    console.log("| --- | --- | --- | --- | --- |");
    if (forwarder) {
      console.log(
        `| forwarder events/s, 20 segments, with membership (median of ${ROUNDS}) | ` +
          `${forwarder.withEventsPerSecond.toFixed(0)} (${forwarder.sharePercent.toFixed(1)}%) | ` +
          `${forwarder.withoutEventsPerSecond.toFixed(0)} without membership (own process) | ` +
          `≥ ${FORWARDER_SHARE_TARGET}% | ${forwarder.pass ? "PASS" : "FAIL"} |`,
      );
    }
    if (sweep) {
      console.log(
        `| time-driven sweep, ${sweep.profiles} profiles, ${sweep.timeDrivenSegments} of ` +
          `${SEGMENTS} segments | ${sweep.seconds.toFixed(1)} s | ` +
          `${sweep.floorSeconds.toFixed(1)} s (count(*) of each, own process) | ` +
          `< ${SWEEP_TARGET_SECONDS} s | ${sweep.pass ? "PASS" : "FAIL"} |`,
      );
    }
    console.log(`\nload average: ${load}`);
    console.log(JSON.stringify({ forwarder, sweep, load }));
    return 0;
  } catch (err) {
    console.error(err);
    return 1;
  } finally {
    await sql.end({ timeout: 5 });
    await admin`drop database if exists ${admin(name)} with (force)`;
    await admin.end({ timeout: 5 });
  }
}

const floorUrl = Deno.env.get("BENCH_AUDIENCES_FLOOR");
const forwarderFloorUrl = Deno.env.get("BENCH_AUDIENCES_FORWARDER_FLOOR");
if (forwarderFloorUrl) {
  await forwarderFloorProcess(forwarderFloorUrl, Deno.env.get("BENCH_AUDIENCES_RUN")!);
} else if (floorUrl) {
  await floorProcess(floorUrl, new Date(Deno.env.get("BENCH_AUDIENCES_FLOOR_AT")!));
} else {
  Deno.exit(await main());
}
