import assert from "node:assert/strict";
import { fitBrandPredictions } from "../../lib/commerce/predictions/brand_predictions.ts";
import { predictionsFitQueuedKey } from "../../lib/store/kv_keys.ts";
import { withContext } from "../test_support.ts";
import { loadOrders, syntheticOrders } from "../lib/commerce/predictions/order_fixture.ts";

const ENV = { PREDICTIONS_MIN_CUSTOMERS: "40", PREDICTIONS_MIN_HISTORY_DAYS: "180" };

Deno.test("predictions: pending, then the fitted model; customer insights gain predicted and churn.probability", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    const get = async (key: string, path: string) => {
      const res = await ctx.request(path, key);
      assert.equal(res.status, 200, path);
      return await res.json();
    };
    const pending = await get(a.key, "/cdp/insights/predictions");
    assert.deepEqual([pending.scope, pending.status, pending.model], [a.scope, "pending", null]);
    // The read queued the brand's first fit.
    assert.notEqual((await ctx.kv.get(predictionsFitQueuedKey(a.brandId))).value, null);

    await loadOrders(ctx.sql, a.brandId, syntheticOrders(120, 500, ctx.clock.now()));
    await fitBrandPredictions(
      { sql: ctx.sql, kv: ctx.kv, now: ctx.clock.now, settings: ctx.config.predictions },
      a.brandId,
    );
    const ready = await get(a.key, "/cdp/insights/predictions");
    assert.equal(ready.status, "ready");
    assert.deepEqual(Object.keys(ready).sort(), [
      "customers",
      "cut_off",
      "distribution",
      "fitted_at",
      "model",
      "reasons",
      "scope",
      "status",
      "validation",
    ]);
    assert.deepEqual(Object.keys(ready.model.bgnbd), ["r", "alpha", "a", "b"]);
    assert.deepEqual(Object.keys(ready.model.gamma_gamma), ["p", "q", "gamma"]);
    assert.equal(ready.validation.by_frequency.length, 8);
    // Another brand's fit is not this one's.
    assert.equal((await get(b.key, "/cdp/insights/predictions")).status, "pending");

    const body = await get(a.key, "/cdp/customers/c3@example.com/insights");
    const { predicted, churn } = body.insights;
    assert.equal(predicted.model, ready.model.selected);
    assert.deepEqual(Object.keys(predicted), [
      "model",
      "p_alive",
      "expected_orders_90d",
      "expected_orders_365d",
      "predicted_clv_365d",
      "expected_next_order_at",
    ]);
    assert.equal(churn.probability, Number((1 - predicted.p_alive).toFixed(4)));
    assert.ok("at_risk" in churn);
    // A customer of brand b has no model to be predicted by.
    await loadOrders(ctx.sql, b.brandId, syntheticOrders(1, 30, ctx.clock.now()));
    const other = await get(b.key, "/cdp/customers/c0@example.com/insights");
    assert.equal(other.insights.predicted, null);
    assert.equal(other.insights.churn.probability, null);
  }, ENV);
});

Deno.test("predictions: needs the commerce gate and a key", async () => {
  await withContext(async (ctx) => {
    assert.equal((await ctx.request("/cdp/insights/predictions", null)).status, 401);
    const noShop = await ctx.seedBrand({ shop: null });
    const res = await ctx.request("/cdp/insights/predictions", noShop.key);
    assert.ok([403, 404].includes(res.status), String(res.status));
    await res.body?.cancel();
  });
});
