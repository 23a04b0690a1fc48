import assert from "node:assert/strict";
import {
  createPredictionsFitJob,
  enqueueAllPredictionsFits,
  enqueuePredictionsFit,
  isPredictionsFitMessage,
} from "../../../../lib/commerce/predictions/fit_job.ts";
import { readBrandPredictions } from "../../../../lib/commerce/predictions/brand_predictions.ts";
import { predictionsFitQueuedKey } from "../../../../lib/store/kv_keys.ts";
import { kvQueue, withBrandDatabase, withKv } from "../../../test_support.ts";
import { loadOrders, syntheticOrders } from "./order_fixture.ts";

const NOW = new Date("2026-11-21T12:00:00Z");
const settings = { minCustomers: 40, minHistoryDays: 180, clvDiscountRate: 0 };

Deno.test("enqueue: one refit waits per brand; a lost one stops absorbing after an hour", async () => {
  await withKv(async (kv) => {
    const queue = kvQueue(kv);
    assert.equal(await enqueuePredictionsFit(queue, "b1", NOW, 60_000), true);
    assert.equal(await enqueuePredictionsFit(queue, "b1", NOW, 60_000), false);
    assert.equal(await enqueuePredictionsFit(queue, "b2", NOW, 60_000), true);
    const later = new Date(NOW.getTime() + 3_600_001);
    assert.equal(await enqueuePredictionsFit(queue, "b1", later, 60_000), true);
  });
});

Deno.test("the job refits the brand (in its worker) and clears the queued marker", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await withKv(async (kv) => {
      await loadOrders(sql, brandId, syntheticOrders(120, 500, NOW));
      assert.equal(await enqueueAllPredictionsFits({ sql, queue: kvQueue(kv) }, NOW), 1);
      assert.notEqual((await kv.get(predictionsFitQueuedKey(brandId))).value, null);
      const job = createPredictionsFitJob({ sql, kv, now: () => NOW, settings });
      const message = { kind: "predictions_fit", brandId };
      assert.ok(isPredictionsFitMessage(message));
      await job(message);
      assert.equal((await kv.get(predictionsFitQueuedKey(brandId))).value, null);
      const stored = await readBrandPredictions(kv, brandId);
      assert.equal(stored?.status, "ready");
      assert.equal(stored?.customers, 120);
      // Malformed: dropped, nothing thrown.
      await job({ kind: "predictions_fit" });
    });
  });
});
