import assert from "node:assert/strict";
import {
  eligibilityReasons,
  fitAndDistribute,
  fitBrandPredictions,
  fitInWorker,
  loadHistories,
  predictionsView,
  readBrandPredictions,
} from "../../../../lib/commerce/predictions/brand_predictions.ts";
import { customerHistories, parseDay } from "../../../../lib/commerce/predictions/rfm_summary.ts";
import { CDNOW_CUT_OFF, cdnowOrders } from "./cdnow_fixture.ts";
import { withBrandDatabase, withKv } from "../../../test_support.ts";
import { loadOrders, orderLine as order, syntheticOrders } from "./order_fixture.ts";

const NOW = new Date("2026-11-21T12:00:00Z");
const settings = { minCustomers: 40, minHistoryDays: 180, clvDiscountRate: 0 };

Deno.test("histories: completed orders only, one transaction per UTC day, totals summed", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await loadOrders(sql, brandId, [
      order("1", "a@example.com", "2026-01-01T00:30:00Z", "10.00"),
      order("2", "a@example.com", "2026-01-01T23:30:00Z", "5.50"),
      order("3", "a@example.com", "2026-01-02T00:10:00Z", "7.00"),
      order("4", "a@example.com", "2026-02-01T00:00:00Z", "99.00", "cancelled"),
      order("5", "b@example.com", "2026-03-01T00:00:00Z", "1.00"),
    ]);
    const histories = await loadHistories(sql, brandId);
    assert.equal(histories.length, 2);
    const a = histories.find((h) => h.totals.length === 2)!;
    assert.deepEqual(a.days, [parseDay("2026-01-01"), parseDay("2026-01-02")]);
    assert.deepEqual(a.totals, [15.5, 7]);
  });
});

Deno.test("eligibility: customers, days of history and a repeat buyer, each with its reason", () => {
  const today = parseDay("2026-11-21");
  const one = { customer: "a", days: [today - 10], totals: [1] };
  assert.deepEqual(eligibilityReasons([one], today, settings), [
    "1 customers with completed orders; at least 40 needed",
    "10 days of order history; at least 180 needed",
    "no customer has ordered on two days",
  ]);
  const old = { customer: "b", days: [today - 400, today - 5], totals: [1, 2] };
  assert.deepEqual(
    eligibilityReasons([one, old], today, { minCustomers: 2, minHistoryDays: 180 }),
    [],
  );
});

Deno.test("a brand short of the rules is insufficient_data, stored with its reasons", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await withKv(async (kv) => {
      assert.equal(predictionsView(await readBrandPredictions(kv, brandId)).status, "pending");
      await loadOrders(sql, brandId, syntheticOrders(10, 400, NOW));
      const stored = await fitBrandPredictions({ sql, kv, now: () => NOW, settings }, brandId);
      assert.equal(stored.status, "insufficient_data");
      assert.deepEqual(stored.reasons, ["10 customers with completed orders; at least 40 needed"]);
      const view = predictionsView(await readBrandPredictions(kv, brandId));
      assert.equal(view.status, "insufficient_data");
      assert.equal(view.model, null);
      assert.equal(view.cut_off, "2026-11-21");
    });
  });
});

Deno.test("a fitted brand: both models, the validation, the CLV distribution; deterministic", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await withKv(async (kv) => {
      await loadOrders(sql, brandId, syntheticOrders(120, 500, NOW));
      const deps = { sql, kv, now: () => NOW, settings };
      const stored = await fitBrandPredictions(deps, brandId);
      assert.equal(stored.status, "ready", stored.reasons.join("; "));
      const view = predictionsView(stored);
      assert.equal(view.customers, 120);
      assert.ok(["bgnbd", "mbgnbd"].includes(view.model!.selected));
      assert.equal(view.model!.time_unit, "day");
      const v = view.validation!;
      assert.equal(v.holdout_days, 90);
      assert.equal(v.holdout_from, "2026-08-24");
      assert.deepEqual(v.by_frequency.map((g) => g.x), ["0", "1", "2", "3", "4", "5", "6", "7+"]);
      assert.equal(v.actual_repeat_orders, v.by_frequency.reduce((s, g) => s + g.actual, 0));
      const selected = view.model!.selected;
      assert.equal(
        v[`${selected}_error`],
        Math.min(v.bgnbd_error, v.mbgnbd_error),
      );
      for (const g of v.by_frequency) assert.equal(g.predicted, g[`predicted_${selected}`]);
      assert.equal(view.distribution!.reduce((s, b) => s + b.customer_count, 0), 120);
      // Same orders, same fit.
      const again = predictionsView(await fitBrandPredictions(deps, brandId));
      assert.deepEqual(again.model, view.model);
      assert.deepEqual(again.validation, view.validation);
    });
  });
});

Deno.test("the fit in its worker is the fit in process", async () => {
  const request = {
    histories: customerHistories(cdnowOrders()),
    cutOffDay: CDNOW_CUT_OFF,
    discountRate: 0.1,
  };
  const inWorker = await fitInWorker(request);
  assert.deepEqual(inWorker, fitAndDistribute(request));
  assert.equal(inWorker.model!.selected, "mbgnbd");
  assert.equal(inWorker.distribution!.reduce((s, b) => s + b.customer_count, 0), 2357);
  // Repeat buyers only, most likely gone first.
  const risk = inWorker.at_risk!;
  assert.equal(risk.length, 50);
  for (let i = 1; i < risk.length; i++) {
    assert.ok(risk[i - 1]!.churn_probability >= risk[i]!.churn_probability);
  }
});
