import assert from "node:assert/strict";
import { lastWebhookReceipt, recordWebhookReceipt } from "../../../lib/shopify/webhook_receipts.ts";
import { withKv } from "../../test_support.ts";

Deno.test("webhook receipts: the shop's latest delivery, one per shop", async () => {
  await withKv(async (kv) => {
    assert.equal(await lastWebhookReceipt(kv, "a.myshopify.com"), null);
    const first = { topic: "orders/create", webhookId: "1", outcome: "applied", receivedAt: "x1" };
    const second = {
      topic: "app/uninstalled",
      webhookId: "2",
      outcome: "applied",
      receivedAt: "x2",
    };
    await recordWebhookReceipt(kv, "a.myshopify.com", first);
    await recordWebhookReceipt(kv, "a.myshopify.com", second);
    assert.deepEqual(await lastWebhookReceipt(kv, "a.myshopify.com"), second);
    assert.equal(await lastWebhookReceipt(kv, "b.myshopify.com"), null);
  });
});
