/**
 * The last Shopify webhook delivery received per shop, kept in Deno KV for the dashboard's
 * health page (deliveries themselves are kept only for deduplication, then deleted).
 *
 * @module
 */
import { lastWebhookKey } from "../store/kv_keys.ts";

/** A verified webhook delivery as the health page shows it. */
export interface WebhookReceipt {
  topic: string;
  webhookId: string;
  outcome: string;
  receivedAt: string;
}

/** Records a verified delivery as the shop's latest (one KV write, last writer wins). */
export async function recordWebhookReceipt(
  kv: Deno.Kv,
  shop: string,
  receipt: WebhookReceipt,
): Promise<void> {
  await kv.set(lastWebhookKey(shop), receipt);
}

/** The shop's latest verified delivery, or null when none was received. */
export async function lastWebhookReceipt(
  kv: Deno.Kv,
  shop: string,
): Promise<WebhookReceipt | null> {
  return (await kv.get<WebhookReceipt>(lastWebhookKey(shop))).value;
}
