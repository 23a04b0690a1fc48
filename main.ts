/**
 * The service's entry (`deno task start`, `deno task dev`, the Deno Deploy entrypoint): config,
 * stores, the app, the forwarder, `Deno.serve` and a bounded shutdown (docs/operations.md).
 *
 * @module
 */
import { createApp } from "./routes/app.ts";
import { COMMANDS } from "./lib/admin/command_table.ts";
import { log, setLogLevel } from "./lib/log.ts";
import { startStatisticsRefresh } from "./lib/store/statistics.ts";
import { guardStrayConnectionFailures } from "./lib/store/stray_failures.ts";
import { failStart, loadConfigOrFail } from "./lib/start_failure.ts";
import type { IngestQueue } from "./lib/ingest/queue.ts";
import { openRuntime } from "./lib/runtime/runtime.ts";
import { enqueueAllPredictionsFits } from "./lib/commerce/predictions/fit_job.ts";
import { privacyUpkeep } from "./lib/privacy/upkeep.ts";
import { enqueueSweep } from "./lib/audiences/jobs.ts";

// Deno Deploy runs a registered cron job even while no request keeps an instance alive, and
// registers only those made at the top level before serving: this one drains the ingest outbox
// (INGEST_QUEUE=outbox) of a batch accepted just before the last instance stopped.
let queue: IngestQueue | null = null;
// The daily refit of every brand's predictions (docs/commerce.md), queued once the stores are open.
let refitAll: (() => Promise<void>) | null = null;
// A delivery pass to the destinations (docs/audiences.md#delivery), for when no instance is alive.
let deliver: (() => Promise<void>) | null = null;
// Lost privacy requests queued again, and event retention enforced (docs/privacy.md).
let upkeep: (() => Promise<void>) | null = null;
// The minute's sweep of time-driven segments (docs/audiences.md): the forwarder's timer queues
// it too; a sweep already waiting absorbs the other.
let sweep: (() => Promise<void>) | null = null;
if (typeof Deno.cron === "function") {
  Deno.cron("drain the ingest outbox", "* * * * *", () => queue?.drained());
  Deno.cron("deliver to destinations", "* * * * *", () => deliver?.());
  Deno.cron("refit predictions", "17 3 * * *", () => refitAll?.());
  Deno.cron("privacy upkeep", "* * * * *", () => upkeep?.());
  Deno.cron("sweep time-driven segments", "* * * * *", () => sweep?.());
}

// A database restart can leave the driver's socket rejecting a promise nobody awaits.
guardStrayConnectionFailures();

const config = loadConfigOrFail(Deno.env.toObject());
setLogLevel(config.logLevel);
const runtime = await openRuntime(config, { serve: true }).catch(failStart);
queue = runtime.queue;
sweep = () =>
  enqueueSweep(runtime.queue, runtime.now()).then(
    () => {},
    (err) => log("error", "membership sweep not queued", { error: String(err) }),
  );
deliver = () =>
  runtime.deliverDestinations().catch((err) =>
    log("error", "destination delivery pass failed", { error: String(err) })
  );
refitAll = () =>
  enqueueAllPredictionsFits({ sql: runtime.sql, queue: runtime.queue }, runtime.now()).then(
    (queued) => log("info", "daily predictions refit queued", { brands: queued }),
    (err) => log("error", "daily predictions refit not queued", { error: String(err) }),
  );
upkeep = () => privacyUpkeep(runtime);
const app = createApp({
  kv: runtime.kv,
  queue: runtime.queue,
  sql: runtime.sql,
  database: runtime.database,
  engine: runtime.engine,
  now: runtime.now,
  newId: runtime.newId,
  cipher: runtime.cipher,
  hasher: runtime.hasher,
  config,
  log,
}, { adminCommands: COMMANDS });
// FORWARDER=off leaves the queue to a worker process of its own (`deno task worker`).
const forwarder = config.forwarder ? runtime.startForwarder() : Promise.resolve();

// Embedded PGlite has no autovacuum: the owner refreshes the planner's statistics itself.
const stopStatistics = runtime.database.mode === "embedded-owner"
  ? startStatisticsRefresh({
    sql: runtime.sql,
    intervalMs: 10 * 60_000,
    onError: (err) => log("error", "statistics refresh failed", { error: String(err) }),
  })
  : () => Promise.resolve();

const server = Deno.serve({
  port: config.port,
  onListen: ({ hostname, port }) =>
    log("info", "listening", {
      url: `http://${hostname === "0.0.0.0" ? "localhost" : hostname}:${port}`,
      database: runtime.database.mode,
      kv: config.kvPath ?? "default",
      ingestQueue: config.ingestQueue,
      docs: `http://localhost:${port}/docs`,
      dashboard: config.shopify.apiKey && config.shopify.apiSecret
        ? "deno task admin app-url --brand ID prints a signed-in URL"
        : "set SHOPIFY_API_KEY and SHOPIFY_API_SECRET, then deno task admin app-url --brand ID",
    }),
}, app.fetch);

// In-flight requests get this long to finish; then the process ends whatever still waits.
const _SHUTDOWN_MS = 10_000;

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  setTimeout(() => {
    log("error", "shutdown timed out; exiting");
    Deno.exit(1);
  }, _SHUTDOWN_MS);
  await server.shutdown();
  await stopStatistics();
  // A message being applied is redelivered at the next start.
  await runtime.close();
  await forwarder.catch(() => {});
  Deno.exit(0);
}
Deno.addSignalListener("SIGINT", shutdown);
Deno.addSignalListener("SIGTERM", shutdown);
