/**
 * Refitting a brand's predictions in the background (`kind: "predictions_fit"` sent on the ingest
 * queue, run by the forwarder like `shop_sync`): queued after an orders import or a Shopify
 * backfill and, for every brand, once a day (main.ts's cron). A refit already waiting for the
 * brand absorbs another request, so a burst of imports costs one fit.
 *
 * @module
 */
import { log } from "../../log.ts";
import type { IngestQueue } from "../../ingest/queue.ts";
import type { Sql } from "../../store/db.ts";
import { predictionsFitQueuedKey } from "../../store/kv_keys.ts";
import { fitBrandPredictions, type PredictionDeps } from "./brand_predictions.ts";

/** The queue message of a refit. */
export interface PredictionsFitMessage {
  kind: "predictions_fit";
  brandId: string;
}

/** A queued refit older than this is taken as lost (its marker no longer absorbs requests). */
const _QUEUED_TTL_MS = 3_600_000;

/** Whether a queue message is a refit job. */
export function isPredictionsFitMessage(message: unknown): message is PredictionsFitMessage {
  const m = message as Partial<PredictionsFitMessage> | null;
  return m?.kind === "predictions_fit" && typeof m.brandId === "string";
}

/**
 * Queues a refit of the brand unless one is already waiting; answers whether it queued one.
 * `delayMs` lets the writes that prompted it settle first.
 */
export async function enqueuePredictionsFit(
  queue: Pick<IngestQueue, "kv" | "send">,
  brandId: string,
  now: Date,
  delayMs = 0,
): Promise<boolean> {
  const key = predictionsFitQueuedKey(brandId);
  const current = await queue.kv.get<string>(key);
  if (current.value && now.getTime() - Date.parse(current.value) < _QUEUED_TTL_MS) return false;
  const message: PredictionsFitMessage = { kind: "predictions_fit", brandId };
  return await queue.send(message, {
    delay: delayMs,
    with: (op) => op.check(current).set(key, now.toISOString(), { expireIn: _QUEUED_TTL_MS }),
  });
}

/** Queues a refit of every brand (the daily refit); answers how many were queued. */
export async function enqueueAllPredictionsFits(
  deps: { sql: Sql; queue: Pick<IngestQueue, "kv" | "send"> },
  now: Date,
): Promise<number> {
  const brands = await deps.sql<{ id: string }[]>`select id from brands order by id`;
  let queued = 0;
  for (const { id } of brands) if (await enqueuePredictionsFit(deps.queue, id, now)) queued++;
  return queued;
}

/**
 * The job's handler: clears the brand's queued marker (a request from now on queues another
 * refit, which will see later orders), then fits. A failure is thrown so the queue redelivers it.
 */
export function createPredictionsFitJob(
  deps: PredictionDeps,
): (message: unknown) => Promise<void> {
  return async (message) => {
    if (!isPredictionsFitMessage(message)) {
      log("error", "malformed predictions_fit message dropped");
      return;
    }
    await deps.kv.delete(predictionsFitQueuedKey(message.brandId));
    const stored = await fitBrandPredictions(deps, message.brandId);
    log("info", "predictions fitted", {
      brand: message.brandId,
      status: stored.status,
      customers: stored.customers,
      selected: stored.model?.selected ?? null,
      fit_ms: stored.fit_ms,
    });
  };
}
