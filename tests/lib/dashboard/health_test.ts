import assert from "node:assert/strict";
import { brandHealth } from "../../../lib/dashboard/health.ts";
import { type EventsMessage, writeDeadLetter } from "../../../lib/ingest/queue.ts";
import { recordWebhookReceipt } from "../../../lib/shopify/webhook_receipts.ts";
import { ingestBacklogCounterKey } from "../../../lib/store/kv_keys.ts";
import { withKv } from "../../test_support.ts";

const message = (id: string, brandId: string): EventsMessage => ({
  kind: "events",
  id,
  brandId,
  batch: {
    scope: "a.myshopify.com",
    source: "server",
    receivedAt: "2026-11-21T00:00:00Z",
    events: [],
  },
});

Deno.test("brand health: the service's backlog, the brand's own dead letters (newest five), its shop's last webhook", async () => {
  await withKv(async (kv) => {
    await kv.atomic()
      .sum(ingestBacklogCounterKey("enqueued"), 10n)
      .sum(ingestBacklogCounterKey("done"), 3n)
      .commit();
    for (let i = 0; i < 7; i++) {
      await writeDeadLetter(
        kv,
        message(`m${i}`, "A"),
        `reason ${i}`,
        new Date(Date.UTC(2026, 10, i + 1)),
      );
    }
    await writeDeadLetter(kv, message("other", "B"), "theirs", new Date());
    await recordWebhookReceipt(kv, "b.myshopify.com", {
      topic: "orders/create",
      webhookId: "w0",
      outcome: "applied",
      receivedAt: "2026-11-20T00:00:00.000Z",
    });
    await recordWebhookReceipt(kv, "a.myshopify.com", {
      topic: "orders/updated",
      webhookId: "w1",
      outcome: "applied",
      receivedAt: "2026-11-21T00:00:00.000Z",
    });

    const health = await brandHealth({ kv }, { brandId: "A", shop: "a.myshopify.com" });
    assert.equal(health.backlog, 7);
    assert.equal(health.deadLetterCount, 7);
    assert.deepEqual(health.deadLetters.map((l) => l.id), ["m6", "m5", "m4", "m3", "m2"]);
    assert.equal(health.lastWebhook?.webhookId, "w1");
    assert.equal(health.lastBackfill, null);

    const none = await brandHealth({ kv }, {
      brandId: "C",
      shop: "c.myshopify.com",
    });
    assert.deepEqual([none.deadLetterCount, none.lastWebhook, none.lastBackfill], [0, null, null]);
  });
});
