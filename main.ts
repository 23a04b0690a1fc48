/**
 * The service's entry (`deno task dev`): config, stores, the app, the forwarder, `Deno.serve`
 * and a bounded shutdown (docs/operations.md).
 *
 * @module
 */
import { createApp } from "./routes/app.ts";
import { loadConfig } from "./lib/config.ts";
import { log } from "./lib/log.ts";
import { createEmbeddedEngine } from "./lib/engine/embedded.ts";
import { ulidSource } from "./lib/ids.ts";
import { startStatisticsRefresh } from "./lib/store/statistics.ts";
import { openStores } from "./lib/store/stores.ts";
import { startForwarder } from "./lib/ingest/forwarder.ts";

const config = loadConfig(Deno.env.toObject());
const stores = await openStores(config, { serve: true });
const now = () => new Date();
const engine = createEmbeddedEngine({ sql: stores.sql, now });
const app = createApp({
  kv: stores.kv,
  sql: stores.sql,
  engine,
  now,
  newId: ulidSource(),
  config,
});
// FORWARDER=off leaves the queue to a worker process of its own (`deno task worker`).
const forwarder = config.forwarder
  ? startForwarder({ kv: stores.kv, engine, now, concurrency: config.forwarderConcurrency })
  : Promise.resolve();

// Embedded PGlite has no autovacuum: the owner refreshes the planner's statistics itself.
const stopStatistics = stores.database.mode === "embedded-owner"
  ? startStatisticsRefresh({
    sql: stores.sql,
    intervalMs: 10 * 60_000,
    onError: (err) => log("error", "statistics refresh failed", { error: String(err) }),
  })
  : () => Promise.resolve();

const server = Deno.serve({
  port: config.port,
  onListen: ({ hostname, port }) =>
    log("info", "listening", {
      url: `http://${hostname === "0.0.0.0" ? "localhost" : hostname}:${port}`,
      database: stores.database.mode,
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
  // Closing KV ends listenQueue; a message being applied is redelivered at the next start.
  await stores.close();
  await forwarder.catch(() => {});
  Deno.exit(0);
}
Deno.addSignalListener("SIGINT", shutdown);
Deno.addSignalListener("SIGTERM", shutdown);
