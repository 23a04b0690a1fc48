/**
 * `deno task worker`: a forwarder process of its own, beside a service run with FORWARDER=off.
 *
 * @module
 */
import { log, setLogLevel } from "../lib/log.ts";
import { createEmbeddedEngine } from "../lib/engine/embedded.ts";
import { ulidSource } from "../lib/ids.ts";
import { startForwarder } from "../lib/ingest/forwarder.ts";
import { createOutbox } from "../lib/ingest/outbox.ts";
import { failStart, loadConfigOrFail } from "../lib/start_failure.ts";
import { shopSyncDeps } from "../lib/shopify/shop_sync.ts";
import { createPredictionsFitJob } from "../lib/commerce/predictions/fit_job.ts";
import { createShopSyncJob } from "../lib/shopify/shop_sync_job.ts";
import { openStores } from "../lib/store/stores.ts";

// A delivery waiting for the database must not hold the process: it ends within this.
const _SHUTDOWN_MS = 10_000;

const config = loadConfigOrFail(Deno.env.toObject());
setLogLevel(config.logLevel);
// Serving: when the worker starts first it owns the embedded database and the service connects
// to it, so the engine's work stays off the service's event loop.
const stores = await openStores(config, { serve: true }).catch(failStart);
const outbox = config.ingestQueue === "outbox"
  ? createOutbox(stores.kv, { newId: ulidSource(), concurrency: config.forwarderConcurrency })
  : null;
const now = () => new Date();
const engine = createEmbeddedEngine({ sql: stores.sql, now });
const running = startForwarder({
  kv: outbox?.kv ?? stores.kv,
  engine,
  now,
  concurrency: config.forwarderConcurrency,
  // The outbox is polled; only KV's queue needs waking for another process's messages.
  wakeMs: outbox ? undefined : 250,
  jobs: {
    shop_sync: createShopSyncJob(shopSyncDeps(stores, config)),
    predictions_fit: createPredictionsFitJob({
      sql: stores.sql,
      kv: outbox?.kv ?? stores.kv,
      now,
      settings: config.predictions,
    }),
  },
});
log("info", "forwarder running", {
  database: stores.database.mode,
  concurrency: config.forwarderConcurrency,
  ingestQueue: config.ingestQueue,
});

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  setTimeout(() => Deno.exit(1), _SHUTDOWN_MS);
  // Closing KV ends listenQueue; a message being applied is redelivered at the next start.
  outbox?.stop();
  await stores.close();
  await running.catch(() => {});
  Deno.exit(0);
}
Deno.addSignalListener("SIGINT", shutdown);
Deno.addSignalListener("SIGTERM", shutdown);
await running;
