/**
 * Erase benchmark (issue: an erase of a person with 100,000 events completes in under a minute
 * while ingest continues): the privacy job's erase of one person, beside the floor (plain
 * `DELETE`s of the same amount in a process of its own, bench/privacy_floor.ts), both while a
 * writer keeps applying event batches of other people through the engine (with its privacy
 * admission hook), as the forwarder does.
 *
 *   deno task bench:privacy      (deno run -A --unstable-kv bench/privacy_load.ts)
 *
 * 1. Creates a scratch database `bench_privacy_<random>` on PostgreSQL (BENCH_DATABASE_URL),
 *    migrates it, makes a brand and, per round, two people of BENCH_EVENTS (100,000) events each
 *    over 100 sessions (one for us, one for the floor) beside 1,000 other profiles of 100 events.
 * 2. Per round (BENCH_ROUNDS, 1), alternating which side goes first: the erase request recorded
 *    and run by the privacy job (every step: the blocks under the scope's write lock, then the
 *    data), and the floor's DELETEs; ingest runs throughout, and its events/s during each side is
 *    printed.
 *
 * Prints progress on stderr and one JSON line on stdout (the median of each side, the ingest
 * rates, the load average); PASS when our erase takes under 60 s, FAIL otherwise. Exit code 1
 * only when the run is invalid (an error, or an erase that left events of the person).
 *
 * Environment: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test; an admin
 * connection that creates and drops the scratch database), BENCH_EVENTS, BENCH_ROUNDS.
 *
 * @module
 */
import postgres from "postgres";
import { monotonicFactory } from "ulid";
import { createEmbeddedEngine } from "../lib/engine/embedded.ts";
import type { IngestEvent } from "../lib/engine/engine.ts";
import { createPrivacyAdmission } from "../lib/privacy/admission.ts";
import { lazyIdentifierHasher } from "../lib/privacy/identifiers.ts";
import { createPrivacyJob, createRequest } from "../lib/privacy/requests.ts";
import { connectPostgres, type Sql } from "../lib/store/db.ts";
import { migrate } from "../lib/store/migrations.ts";
import { createBrand } from "../lib/tenancy/brands.ts";
import { openTokenCipher } from "../lib/tenancy/token_cipher.ts";
import { intEnv, percentile, pumpLines, startBenchRun } from "./bench_support.ts";

const ADMIN_URL = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const EVENTS = intEnv("BENCH_EVENTS", 100_000);
const ROUNDS = intEnv("BENCH_ROUNDS", 1);
const TARGET_S = 60;
const RUN = startBenchRun("privacy_load", 30 * 60_000);
const newId = monotonicFactory();

const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
const dbName = `bench_privacy_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
await admin.unsafe(`create database ${dbName}`);
const url = new URL(ADMIN_URL);
url.pathname = `/${dbName}`;
const sql = connectPostgres(url.toString(), 8);
RUN.onCleanup("drop the scratch database", async () => {
  await sql.end({ timeout: 5 });
  await admin.unsafe(`drop database if exists ${dbName} with (force)`);
  await admin.end();
});
const kv = await Deno.openKv(":memory:");
RUN.onCleanup("close KV", () => Promise.resolve(kv.close()));

let exitCode = 0;
try {
  await migrate(sql);
  const scope = "bench-privacy.myshopify.com";
  const brand = await createBrand(
    { sql, newId, now: () => new Date(), cipher: await openTokenCipher(kv, undefined) },
    { name: "Bench", shop: scope, beta: true },
  );
  await _seedOthers(sql, scope);
  const hasher = lazyIdentifierHasher(kv, undefined);
  const engine = createEmbeddedEngine({
    sql,
    now: () => new Date(),
    admission: createPrivacyAdmission(hasher),
  });
  const job = createPrivacyJob({
    sql,
    now: () => new Date(),
    hasher,
    exportBudget: { permit: () => () => {}, timeoutMs: 10_000 },
  });

  // Ingest throughout: batches of 50 events of the other people, applied one after another.
  let ingested = 0;
  let ingesting = true;
  const ingest = (async () => {
    while (ingesting) {
      const events: IngestEvent[] = Array.from({ length: 50 }, (_, i) => ({
        id: newId(),
        eventType: "page_viewed",
        profileId: `other-${(ingested + i) % 1000}`,
        properties: { url: "https://bench/" },
      }));
      await engine.applyEvents({
        scope,
        source: "server",
        receivedAt: new Date().toISOString(),
        events,
      });
      ingested += events.length;
    }
  })();
  const during = async <T>(work: () => Promise<T>) => {
    const before = ingested;
    const started = performance.now();
    const result = await work();
    const seconds = (performance.now() - started) / 1000;
    return { result, seconds, ingestPerSecond: (ingested - before) / seconds };
  };

  const ours: number[] = [];
  const floor: number[] = [];
  const oursIngest: number[] = [];
  const floorIngest: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const victim = `victim-${round}`;
    const twin = `twin-${round}`;
    RUN.progress(`round ${round + 1}: seeding 2 x ${EVENTS} events`);
    await _seedPerson(sql, scope, victim, EVENTS);
    await _seedPerson(sql, scope, twin, EVENTS);
    await sql`analyze events`;
    const sides = [
      async () => {
        const measured = await during(async () => {
          const request = await createRequest(
            {
              sql,
              queue: { send: () => Promise.resolve(true) },
              now: () => new Date(),
              newId,
              hasher: await hasher(),
            },
            { brandId: brand.id, scope, type: "erase", identifier: victim, requestedBy: "bench" },
          );
          await job({ kind: "privacy_request", brandId: brand.id, requestId: request.id });
          return request.id;
        });
        const [left] = await sql<{ n: number }[]>`
          select count(*)::int as n from events where scope = ${scope} and profile_id = ${victim}`;
        if (left!.n !== 0) throw new Error(`the erase left ${left!.n} events`);
        ours.push(measured.seconds);
        oursIngest.push(measured.ingestPerSecond);
        RUN.progress(
          `ours: ${measured.seconds.toFixed(2)} s, ingest ${
            measured.ingestPerSecond.toFixed(0)
          } events/s`,
        );
      },
      async () => {
        const measured = await during(() => _floor(url.toString(), scope, twin));
        floor.push(measured.result);
        floorIngest.push(measured.ingestPerSecond);
        RUN.progress(
          `floor: ${measured.result.toFixed(2)} s, ingest ${
            measured.ingestPerSecond.toFixed(0)
          } events/s`,
        );
      },
    ];
    for (const side of round % 2 === 0 ? sides : sides.reverse()) await side();
  }
  ingesting = false;
  await ingest;
  const median = (values: number[]) => percentile(values, 50);
  const summary = {
    events: EVENTS,
    rounds: ROUNDS,
    erase_s: median(ours),
    floor_s: median(floor),
    ratio: median(ours) / median(floor),
    ingest_events_per_s_during_erase: Math.round(median(oursIngest)),
    ingest_events_per_s_during_floor: Math.round(median(floorIngest)),
    load: Deno.loadavg(),
    target: `erase under ${TARGET_S} s while ingest continues`,
    verdict: median(ours) < TARGET_S && median(oursIngest) > 0 ? "PASS" : "FAIL",
  };
  console.log(JSON.stringify(summary));
} catch (err) {
  console.error(err);
  exitCode = 1;
} finally {
  await RUN.cleanupAll(30_000);
}
Deno.exit(exitCode);

/** One person: a profile with `events` events over 100 sessions. */
async function _seedPerson(sql: Sql, scope: string, id: string, events: number): Promise<void> {
  const at = new Date(Date.now() - 86_400_000);
  await sql`
    insert into profiles (scope, item_id, properties, provenance, created_at, updated_at,
                          first_visit, last_visit, nb_of_visits)
    values (${scope}, ${id}, ${sql.json({ email: `${id}@example.com` })}, 'server', ${at}, ${at},
            ${at}, ${at}, 100)`;
  await sql`
    insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                        flattened_properties, source, received_at)
    select ${scope}, ${id} || '-' || g, ${id}, ${id} || ':' || (g % 100), 'page_viewed',
           ${at}::timestamptz + g * interval '1 second', '{"url":"https://bench/"}', '{}',
           'server', ${at}
    from generate_series(1, ${events}) g`;
  await sql`
    insert into sessions (scope, item_id, profile_id, first_event_at, last_event_at, event_count)
    select ${scope}, ${id} || ':' || s, ${id}, ${at}, ${at}, ${events / 100}
    from generate_series(0, 99) s`;
}

/** 1,000 other profiles of 100 events each: the table the deletes find the person in. */
async function _seedOthers(sql: Sql, scope: string): Promise<void> {
  const at = new Date(Date.now() - 86_400_000);
  await sql`
    insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
    select ${scope}, 'other-' || p, '{}', 'server', ${at}, ${at} from generate_series(0, 999) p`;
  await sql`
    insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                        flattened_properties, source, received_at)
    select ${scope}, 'seed-' || g, 'other-' || (g % 1000), 'other-' || (g % 1000) || ':s',
           'page_viewed', ${at}::timestamptz + g * interval '1 second', '{}', '{}', 'server', ${at}
    from generate_series(1, 100000) g`;
}

/** The floor's DELETEs in a process of their own; answers their seconds. */
async function _floor(databaseUrl: string, scope: string, profile: string): Promise<number> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./privacy_floor.ts", import.meta.url).pathname],
    env: { FLOOR_DATABASE_URL: databaseUrl, FLOOR_SCOPE: scope, FLOOR_PROFILE: profile },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let line = "";
  const out = pumpLines(child.stdout, (l) => void (line = l || line));
  const err = pumpLines(child.stderr, (l) => RUN.progress(`floor: ${l}`));
  const status = await child.status;
  await out;
  await err;
  if (!status.success) throw new Error(`the floor exited ${status.code}`);
  return JSON.parse(line).seconds;
}
