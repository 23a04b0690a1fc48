/**
 * What the dashboard's health page shows for a brand: the ingest backlog, the brand's dead
 * letters, the messages refused inside its accepted requests, the last webhook its shop sent,
 * and its last Shopify history backfill.
 *
 * @module
 */
import {
  type DeadLetter,
  type IngestQueue,
  listDeadLetters,
  readBacklog,
} from "../ingest/queue.ts";
import {
  listRejectedMessages,
  rejectedCount,
  type RejectedMessage,
} from "../ingest/rejected_messages.ts";
import { readShopSyncState } from "../shopify/shop_sync.ts";
import { lastWebhookReceipt, type WebhookReceipt } from "../shopify/webhook_receipts.ts";

/** A backfill run as the health page shows it. */
export interface BackfillStatus {
  state: string;
  startedAt: string;
  finishedAt: string | null;
  /** Free text: counts, or the error of a failed run. */
  detail: string | null;
}

/** A brand's health. */
export interface BrandHealth {
  backlog: number;
  deadLetterCount: number;
  /** The newest few, newest first. */
  deadLetters: DeadLetter[];
  /** Messages refused inside accepted requests, ever. */
  rejectedCount: number;
  /** The newest few kept, newest first. */
  rejected: RejectedMessage[];
  lastWebhook: WebhookReceipt | null;
  lastBackfill: BackfillStatus | null;
}

const _SHOWN_DEAD_LETTERS = 5;
const _SHOWN_REJECTED = 5;

/** Reads a brand's health from the stores (the backlog is the service's, shared by brands). */
export async function brandHealth(
  deps: { kv: Deno.Kv; queue?: Pick<IngestQueue, "kv" | "backlog"> },
  brand: { brandId: string; shop: string },
): Promise<BrandHealth> {
  const [backlog, letters, refused, rejected, lastWebhook, lastBackfill] = await Promise.all([
    deps.queue?.backlog() ?? readBacklog(deps.kv),
    listDeadLetters(deps.queue?.kv ?? deps.kv, brand.brandId),
    rejectedCount(deps.kv, brand.brandId),
    listRejectedMessages(deps.kv, brand.brandId, _SHOWN_REJECTED),
    lastWebhookReceipt(deps.kv, brand.shop),
    _lastBackfill(deps.kv, brand.brandId),
  ]);
  return {
    backlog,
    deadLetterCount: letters.length,
    deadLetters: letters.slice(-_SHOWN_DEAD_LETTERS).reverse(),
    rejectedCount: refused,
    rejected,
    lastWebhook,
    lastBackfill,
  };
}

async function _lastBackfill(kv: Deno.Kv, brandId: string): Promise<BackfillStatus | null> {
  const state = await readShopSyncState(kv, brandId);
  if (!state) return null;
  const { orders, customers, lineItems, rejected } = state.counts;
  return {
    state: state.status,
    startedAt: state.startedAt ?? state.queuedAt ?? state.updatedAt,
    finishedAt: state.finishedAt,
    detail: state.lastError ??
      `${orders} orders, ${customers} customers, ${lineItems} line items, ${rejected} rejected`,
  };
}
