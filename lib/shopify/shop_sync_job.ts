/**
 * The backfill as a queue job (`kind: "shop_sync"`): `shop sync --background` sends it on the
 * ingest queue (lib/ingest/queue.ts) and the service's forwarder runs it (lib/ingest/forwarder.ts dispatches on the
 * kind). Delivery is at least once: a job already completed is not run again, and one redelivered
 * mid-way resumes its own run (lib/shopify/shop_sync.ts).
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import { log } from "../log.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import { shopSyncStateKey } from "../store/kv_keys.ts";
import type { SyncKind } from "./bulk_mapping.ts";
import {
  newShopSyncState,
  readShopSyncState,
  runShopSync,
  type ShopSyncDeps,
  type ShopSyncRequest,
  type ShopSyncState,
} from "./shop_sync.ts";

/** The queue message of a backfill. */
export interface ShopSyncMessage extends ShopSyncRequest {
  kind: "shop_sync";
}

/** Whether a queue message is a backfill job. */
export function isShopSyncMessage(message: unknown): message is ShopSyncMessage {
  const m = message as Partial<ShopSyncMessage> | null;
  return m?.kind === "shop_sync" && typeof m.runId === "string" &&
    typeof m.brandId === "string" && (m.since === null || typeof m.since === "string") &&
    (m.only === null || m.only === "orders" || m.only === "customers");
}

/**
 * Enqueues a backfill and records it `queued`, in one atomic commit. Refused (`conflict`) while
 * the brand's latest backfill waits in the queue; two runs at once are refused by Shopify itself
 * (one bulk query per shop at a time).
 */
export async function enqueueShopSync(
  queue: Pick<IngestQueue, "kv" | "send">,
  input: { brandId: string; since: string | null; only: SyncKind | null; runId: string },
  now: Date,
): Promise<ShopSyncState> {
  const key = shopSyncStateKey(input.brandId);
  const current = await queue.kv.get<ShopSyncState>(key);
  if (current.value?.status === "queued") {
    throw new DomainError(
      "conflict",
      `a backfill of brand ${input.brandId} is already queued (run ${current.value.runId})`,
    );
  }
  const state = newShopSyncState(input, now);
  const message: ShopSyncMessage = { kind: "shop_sync", ...input };
  const committed = await queue.send(message, { with: (op) => op.check(current).set(key, state) });
  if (!committed) {
    throw new DomainError("conflict", `another backfill of brand ${input.brandId} was just queued`);
  }
  return state;
}

/**
 * The job's handler (`onCompleted` runs after a completed backfill: the runtime queues the brand's
 * predictions refit there). A refusal that a retry cannot change (a userError, a FAILED operation, no
 * token) is recorded in the state and the message is done; anything else (Shopify or the
 * database unreachable) is thrown, so the queue redelivers it and the run resumes.
 */
export function createShopSyncJob(
  deps: ShopSyncDeps,
  onCompleted: (brandId: string) => Promise<unknown> = () => Promise.resolve(),
): (message: unknown) => Promise<void> {
  return async (message) => {
    if (!isShopSyncMessage(message)) {
      log("error", "malformed shop_sync message dropped");
      return;
    }
    const state = await readShopSyncState(deps.kv, message.brandId);
    if (state && state.runId !== message.runId) return;
    if (state?.status === "completed") return;
    try {
      const result = await runShopSync(deps, message);
      log("info", "shop sync completed", {
        brand: message.brandId,
        run: message.runId,
        orders: result.orders,
        customers: result.customers,
        rejected: result.rejected.length,
      });
      await onCompleted(message.brandId);
    } catch (err) {
      const permanent = err instanceof DomainError &&
        ["conflict", "forbidden", "upstream_failed", "invalid_input"].includes(err.kind);
      log(permanent ? "warn" : "error", "shop sync failed", {
        brand: message.brandId,
        run: message.runId,
        error: err instanceof Error ? err.message : String(err),
      });
      if (!permanent) throw err;
    }
  };
}
