/**
 * The runtime: what every process starts from. `main.ts`, `workers/forwarder.ts` and the CLI
 * (lib/admin/cli.ts) open the stores, pick the ingest queue `INGEST_QUEUE` names, build the
 * engine and start the forwarder through {@linkcode openRuntime}, so that they cannot wire them
 * differently. Tests build apps over throwaway stores instead (tests/test_support.ts), with the
 * queue from {@linkcode createIngestQueue}.
 *
 * @module
 */
import type { Config } from "../config.ts";
import { ulidSource } from "../ids.ts";
import { createPredictionsFitJob, enqueuePredictionsFit } from "../commerce/predictions/fit_job.ts";
import type { Engine } from "../engine/engine.ts";
import { createEmbeddedEngine } from "../engine/embedded.ts";
import { startForwarder } from "../ingest/forwarder.ts";
import { createOutboxQueue } from "../ingest/outbox.ts";
import { createKvQueue, type IngestQueue } from "../ingest/queue.ts";
import { createPrivacyAdmission } from "../privacy/admission.ts";
import { lazyIdentifierHasher } from "../privacy/identifiers.ts";
import { createPrivacyJob } from "../privacy/requests.ts";
import { shopSyncDeps } from "../shopify/shop_sync.ts";
import { createShopSyncJob } from "../shopify/shop_sync_job.ts";
import type { Database, Sql } from "../store/db.ts";
import { openStores } from "../store/stores.ts";

/** The stores, the ingest queue and the engine of one process, and how to start and stop them. */
export interface Runtime {
  config: Config;
  kv: Deno.Kv;
  sql: Sql;
  database: Database;
  queue: IngestQueue;
  engine: Engine;
  now: () => Date;
  newId: () => string;
  /**
   * Starts the forwarder on the queue (with the `shop_sync`, `predictions_fit` and
   * `privacy_request` jobs); settles when the runtime closes. `wakeMs`: for a forwarder in a
   * process of its own (see `createKvQueue`).
   */
  startForwarder(options?: { wakeMs?: number }): Promise<void>;
  /** Stops consuming and closes the stores; a delivery in flight is redelivered later. */
  close(): Promise<void>;
}

/**
 * Opens the stores (`serve`: this process may own and serve the embedded database; `migrate`:
 * false to leave migrations to the `migrate` command), then the queue and the engine over them.
 * A store that cannot be opened is a `StoreOpenError`.
 */
export async function openRuntime(
  config: Config,
  options: { serve: boolean; migrate?: boolean },
): Promise<Runtime> {
  const stores = await openStores(config, options);
  const newId = ulidSource();
  const now = () => new Date();
  const queue = createIngestQueue(stores.kv, config, newId);
  const hasher = lazyIdentifierHasher(stores.kv, config.tokenEncryptionKey);
  const engine = createEmbeddedEngine({
    sql: stores.sql,
    now,
    admission: createPrivacyAdmission(hasher),
  });
  return {
    config,
    kv: stores.kv,
    sql: stores.sql,
    database: stores.database,
    queue,
    engine,
    now,
    newId,
    startForwarder(forwarderOptions = {}) {
      return startForwarder({
        queue,
        engine,
        now,
        concurrency: config.forwarderConcurrency,
        wakeMs: forwarderOptions.wakeMs,
        jobs: {
          // A completed backfill is new history: the brand's predictions are refitted on it.
          shop_sync: createShopSyncJob(
            shopSyncDeps(stores, config),
            (brandId) => enqueuePredictionsFit(queue, brandId, now()),
          ),
          privacy_request: createPrivacyJob({
            sql: stores.sql,
            now,
            hasher,
            exportBudget: privacyExportBudget(config),
          }),
          predictions_fit: createPredictionsFitJob({
            sql: stores.sql,
            kv: stores.kv,
            now,
            settings: config.predictions,
          }),
        },
      });
    },
    async close() {
      // Closing KV ends Deno KV's listener; the outbox's is stopped first.
      queue.stop();
      await stores.close();
    },
  };
}

/** The ingest queue `config.ingestQueue` names, over `kv`, with the backlog bound and retries. */
export function createIngestQueue(
  kv: Deno.Kv,
  config: Pick<
    Config,
    "ingestQueue" | "ingestRetryBackoffMs" | "ingestMaxBacklog" | "forwarderConcurrency"
  >,
  newId: () => string,
): IngestQueue {
  const options = {
    newId,
    backoffMs: config.ingestRetryBackoffMs,
    maxBacklog: config.ingestMaxBacklog,
  };
  return config.ingestQueue === "outbox"
    ? createOutboxQueue(kv, { ...options, concurrency: config.forwarderConcurrency })
    : createKvQueue(kv, options);
}

/**
 * The budget of a privacy export's segment memberships: the job runs one request at a time, on
 * the forwarder, so it takes no share of the HTTP pool's permits, but the statement budget holds.
 */
export function privacyExportBudget(config: Pick<Config, "queryTimeoutMs">) {
  return { permit: () => () => {}, timeoutMs: config.queryTimeoutMs };
}
