/**
 * The forwarder's floor in a process of its own: FLOOR_WRITERS (4) writers of plain 50-row
 * INSERTs of the forwarder's workload (bench/ingest_workload.ts) into `raw_events`, a copy of
 * `events` with only its primary key. bench/ingest_load.ts spawns it beside its own figures, so
 * that the floor never shares an event loop (or a core's worth of JavaScript) with the driver.
 *
 *   deno run -A bench/ingest_floor.ts
 *
 * Environment: FLOOR_DATABASE_URL (a migrated PostgreSQL database) or FLOOR_DATA_DIR (an embedded
 * database another process serves), FLOOR_SCOPE, FLOOR_SHAPE (`new profiles` or `realistic`),
 * FLOOR_EVENTS (20000), FLOOR_RUN (the profile id prefix, unique per run), FLOOR_WRITERS (4),
 * FLOOR_LIMIT_MS (60000). Creates `raw_events` when missing. Builds the batches and writes 100
 * uncounted ones over its connections before the clock starts; prints one JSON line on stdout:
 * `{"eventsPerSecond", "events", "seconds", "writers", "timedOut"}`.
 *
 * @module
 */
import { monotonicFactory } from "ulid";
import { openDatabase } from "../lib/store/db.ts";
import { BATCH, makeBatches, rawRows, type Shape, SHAPES } from "./ingest_workload.ts";
import { intEnv } from "./bench_support.ts";

const shape = (Deno.env.get("FLOOR_SHAPE") ?? "new profiles") as Shape;
if (!SHAPES.includes(shape)) throw new Error(`FLOOR_SHAPE: unknown ${shape}`);
const scope = Deno.env.get("FLOOR_SCOPE") ?? "floor.myshopify.com";
const run = Deno.env.get("FLOOR_RUN") ?? `floor${Date.now().toString(36)}`;
const events = intEnv("FLOOR_EVENTS", 20_000);
const writers = intEnv("FLOOR_WRITERS", 4);
const limitMs = intEnv("FLOOR_LIMIT_MS", 60_000);
const newId = monotonicFactory();
/** Batches written before the clock starts (not counted). */
const WARM_BATCHES = 100;

const database = await openDatabase({
  databaseUrl: Deno.env.get("FLOOR_DATABASE_URL"),
  dataDir: Deno.env.get("FLOOR_DATA_DIR") ?? "",
  serve: false,
  max: writers,
});
const { sql } = database;
try {
  await sql`create table if not exists raw_events (
    like events including defaults including constraints, primary key (scope, id))`;
  const batches = makeBatches(scope, events, shape, run, newId);
  const insert = async (batch: (typeof batches)[number]) => {
    await sql`insert into raw_events ${sql(rawRows(batch))}`;
  };
  // Before the clock starts, every writer's connection is open and the code that builds and
  // sends an INSERT is compiled: a fresh process runs it cold, the driver's process warm.
  const warm = makeBatches(scope, WARM_BATCHES * BATCH, shape, `${run}w`, newId);
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    for (let i = w; i < warm.length; i += writers) await insert(warm[i]!);
  }));

  let next = 0;
  let written = 0;
  const started = performance.now();
  const deadline = started + limitMs;
  await Promise.all(Array.from({ length: writers }, async () => {
    while (next < batches.length && performance.now() < deadline) {
      const batch = batches[next++]!;
      await insert(batch);
      written += batch.events.length;
    }
  }));
  const seconds = (performance.now() - started) / 1000;
  console.log(JSON.stringify({
    eventsPerSecond: written / seconds,
    events: written,
    seconds,
    writers,
    timedOut: next < batches.length,
  }));
} finally {
  await database.close();
}
