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
import { deliverDue } from "../audiences/delivery.ts";
import { type DeliveryLoop, startDeliveryLoop } from "../audiences/delivery_loop.ts";
import { eraseFromAudiences } from "../audiences/erase.ts";
import {
  type MembershipForwarding,
  membershipForwarding,
  startSweepTimer,
} from "../audiences/jobs.ts";
import type { MembershipDeps } from "../audiences/membership.ts";
import { heavyReadsPerBrand, KeyedSemaphore } from "../http/brand_concurrency.ts";
import { ulidSource } from "../ids.ts";
import { createPredictionsFitJob, enqueuePredictionsFit } from "../commerce/predictions/fit_job.ts";
import type { Engine } from "../engine/engine.ts";
import { createEmbeddedEngine } from "../engine/embedded.ts";
import { startForwarder } from "../ingest/forwarder.ts";
import { createOutboxQueue } from "../ingest/outbox.ts";
import { createKvQueue, type IngestQueue } from "../ingest/queue.ts";
import { createPrivacyAdmission } from "../privacy/admission.ts";
import { type IdentifierHasher, lazyIdentifierHasher } from "../privacy/identifiers.ts";
import { createPrivacyJob } from "../privacy/requests.ts";
import type { Eraser } from "../privacy/erase.ts";
import { shopSyncDeps } from "../shopify/shop_sync.ts";
import { createShopSyncJob } from "../shopify/shop_sync_job.ts";
import { createPixelStitchJob, erasePixelClaims } from "../shopify/pixel_claims.ts";
import type { Database, Sql } from "../store/db.ts";
import { openStores } from "../store/stores.ts";
import { lazyTokenCipher, type TokenCipher } from "../tenancy/token_cipher.ts";

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
  /** Seals and opens secrets at rest (storefront tokens, destinations' signing secrets). */
  cipher: TokenCipher;
  /** The keyed hash of people's identifiers (privacy blocks, requests), opened on first use. */
  hasher: () => Promise<IdentifierHasher>;
  /**
   * Starts the forwarder on the queue (with the `shop_sync`, `pixel_stitch`, `predictions_fit` and
   * `privacy_request` jobs, segment membership's hook and jobs, the minute's sweep of time-driven
   * segments, and the destinations' delivery timer); settles when the runtime closes. `wakeMs`: for
   * a forwarder in a process of its own (see `createKvQueue`).
   */
  startForwarder(options?: { wakeMs?: number }): Promise<void>;
  /** Makes one delivery pass to the destinations now (the Deno Deploy cron's). */
  deliverDestinations(): Promise<void>;
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
  const queue = createIngestQueue(stores.kv, config, newId, stores.reopenKv);
  const hasher = lazyIdentifierHasher(stores.kv, config.tokenEncryptionKey);
  const cipher = lazyTokenCipher(stores.kv, config.tokenEncryptionKey);
  const engine = createEmbeddedEngine({
    sql: stores.sql,
    now,
    admission: createPrivacyAdmission(hasher),
  });
  const deliveryDeps = {
    sql: stores.sql,
    kv: stores.kv,
    now,
    newId,
    settings: config.destinations,
    cipher,
  };
  let delivery: DeliveryLoop | null = null;
  let stopSweeps = () => {};
  let membership: MembershipForwarding | null = null;
  return {
    config,
    kv: stores.kv,
    sql: stores.sql,
    database: stores.database,
    queue,
    engine,
    now,
    newId,
    cipher,
    hasher,
    startForwarder(forwarderOptions = {}) {
      delivery ??= startDeliveryLoop(deliveryDeps);
      membership = membershipForwarding(membershipDeps({ sql: stores.sql, config, now }), queue);
      stopSweeps = startSweepTimer(queue, now);
      return startForwarder({
        queue,
        engine,
        now,
        concurrency: config.forwarderConcurrency,
        wakeMs: forwarderOptions.wakeMs,
        afterApply: membership.afterApply,
        jobs: {
          ...membership.jobs,
          // A completed backfill is new history: the brand's predictions are refitted on it.
          shop_sync: createShopSyncJob(
            shopSyncDeps({ ...stores, cipher }, config),
            (brandId) => enqueuePredictionsFit(queue, brandId, now()),
          ),
          pixel_stitch: createPixelStitchJob({ sql: stores.sql, now }),
          privacy_request: createPrivacyJob({
            sql: stores.sql,
            now,
            hasher,
            exportBudget: privacyExportBudget(config),
            erasers: privacyErasers({ now }),
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
    async deliverDestinations() {
      // Without the timer (FORWARDER=off), one pass of its own.
      if (delivery) await delivery.pass();
      else await deliverDue(deliveryDeps);
    },
    async close() {
      stopSweeps();
      // Closing KV ends Deno KV's listener; the outbox's is stopped first.
      queue.stop();
      // Updates started at once finish on the open pool (their queued jobs are the backstop).
      await membership?.settled();
      await delivery?.stop();
      await stores.close();
    },
  };
}

/**
 * The ingest queue `config.ingestQueue` names, over `kv`, with the backlog bound and retries;
 * `reopenKv` opens `kv`'s file again (see `createKvQueue`).
 */
export function createIngestQueue(
  kv: Deno.Kv,
  config: Pick<
    Config,
    "ingestQueue" | "ingestRetryBackoffMs" | "ingestMaxBacklog" | "forwarderConcurrency"
  >,
  newId: () => string,
  reopenKv?: () => Promise<Deno.Kv>,
): IngestQueue {
  const options = {
    newId,
    backoffMs: config.ingestRetryBackoffMs,
    maxBacklog: config.ingestMaxBacklog,
  };
  return config.ingestQueue === "outbox"
    ? createOutboxQueue(kv, { ...options, concurrency: config.forwarderConcurrency })
    : createKvQueue(kv, { ...options, reopen: reopenKv });
}

/**
 * What an erase removes besides the engine's and commerce's data (lib/privacy/erase.ts): the
 * person's audiences (memberships, change history, destination deliveries) and storefront claims.
 */
export function privacyErasers(
  clock: { now: () => Date },
): Record<string, Eraser> {
  return {
    audiences: (tx, person) => eraseFromAudiences(tx, person, clock),
    storefront: (tx, person) => erasePixelClaims(tx, person),
  };
}

/** How long one segment's evaluation over a whole brand may take: within the sweep's minute. */
const _REFRESH_TIMEOUT_MS = 55_000;

/**
 * Segment membership's dependencies in one process: the brand's share of the pool for heavy
 * reads (as the API's, lib/http/brand_concurrency.ts) and the query budget for the touched
 * profiles of a group.
 */
export function membershipDeps(
  deps: { sql: Sql; config: Pick<Config, "queryTimeoutMs">; now: () => Date },
): MembershipDeps {
  const shares = new KeyedSemaphore(heavyReadsPerBrand(deps.sql.options.max));
  return {
    sql: deps.sql,
    now: deps.now,
    budget: (scope) => ({
      permit: () => shares.tryAcquire(scope),
      timeoutMs: deps.config.queryTimeoutMs,
    }),
    refreshTimeoutMs: _REFRESH_TIMEOUT_MS,
  };
}

/**
 * The budget of a privacy export's segment memberships: the job runs one request at a time, on
 * the forwarder, so it takes no share of the HTTP pool's permits, but the statement budget holds.
 */
export function privacyExportBudget(config: Pick<Config, "queryTimeoutMs">) {
  return { permit: () => () => {}, timeoutMs: config.queryTimeoutMs };
}
