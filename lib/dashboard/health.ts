/**
 * What the dashboard's health page shows for a brand: the ingest backlog, the brand's dead
 * letters, the last webhook its shop sent, and the last backfill when a source of it is given.
 *
 * @module
 */
import { type DeadLetter, listDeadLetters, readBacklog } from "../ingest/queue.ts";
import { lastWebhookReceipt, type WebhookReceipt } from "../shopify/webhook_receipts.ts";

/** A backfill run as the health page shows it. */
export interface BackfillStatus {
  state: string;
  startedAt: string;
  finishedAt: string | null;
  /** Free text: counts, or the error of a failed run. */
  detail: string | null;
}

/** Where the health page learns a brand's last backfill (the Shopify backfill provides it). */
export type LastBackfillSource = (brandId: string) => Promise<BackfillStatus | null>;

/** A brand's health. `lastBackfill` is undefined when no backfill source is configured. */
export interface BrandHealth {
  backlog: number;
  deadLetterCount: number;
  /** The newest few, newest first. */
  deadLetters: DeadLetter[];
  lastWebhook: WebhookReceipt | null;
  lastBackfill: BackfillStatus | null | undefined;
}

const _SHOWN_DEAD_LETTERS = 5;

/** Reads a brand's health from the stores (the backlog is the service's, shared by brands). */
export async function brandHealth(
  deps: { kv: Deno.Kv; queueKv?: Deno.Kv; lastBackfill?: LastBackfillSource },
  brand: { brandId: string; shop: string },
): Promise<BrandHealth> {
  const [backlog, letters, lastWebhook, lastBackfill] = await Promise.all([
    readBacklog(deps.queueKv ?? deps.kv),
    listDeadLetters(deps.kv, brand.brandId),
    lastWebhookReceipt(deps.kv, brand.shop),
    deps.lastBackfill ? deps.lastBackfill(brand.brandId) : Promise.resolve(undefined),
  ]);
  return {
    backlog,
    deadLetterCount: letters.length,
    deadLetters: letters.slice(-_SHOWN_DEAD_LETTERS).reverse(),
    lastWebhook,
    lastBackfill,
  };
}
