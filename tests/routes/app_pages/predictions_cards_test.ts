import assert from "node:assert/strict";
import { fitBrandPredictions } from "../../../lib/commerce/predictions/brand_predictions.ts";
import { type TestContext, withContext } from "../../test_support.ts";
import { loadOrders, syntheticOrders } from "../../lib/commerce/predictions/order_fixture.ts";
import { APP_ENV, openDashboard } from "./dashboard_fixture.ts";
import { chartSvg, tableRows, textOf } from "./page_html.ts";

async function html(ctx: TestContext, path: string, s: string): Promise<string> {
  const res = await ctx.app.request(`${path}?s=${encodeURIComponent(s)}`);
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  return await res.text();
}

Deno.test("insights page: predicted CLV beside LTV, the calibration chart and the churn list, as the API", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const s = await openDashboard(ctx, a.scope!);
    // Before any fit: the card says so.
    assert.match(textOf(await html(ctx, "/app/insights", s)), /none yet/);

    await loadOrders(ctx.sql, a.brandId, syntheticOrders(120, 500, ctx.clock.now()));
    await fitBrandPredictions(
      { sql: ctx.sql, kv: ctx.kv, now: ctx.clock.now, settings: ctx.config.predictions },
      a.brandId,
    );
    const body = await html(ctx, "/app/insights", s);
    const res = await ctx.request("/cdp/insights/predictions", a.key);
    const api = await res.json();
    const ltv = await (await ctx.request("/cdp/insights/ltv", a.key)).json();

    assert.deepEqual(
      tableRows(body, "predicted-clv"),
      api.distribution.map((b: { label: string; customer_count: number }, i: number) => [
        b.label,
        String(ltv.distribution[i].customer_count),
        String(b.customer_count),
      ]),
    );
    assert.match(chartSvg(body, "predicted-clv"), /<svg/);
    assert.deepEqual(
      tableRows(body, "calibration"),
      api.validation.by_frequency.map((g: Record<string, number | string>) =>
        [g.x, g.customers, g.actual, g.predicted_bgnbd, g.predicted_mbgnbd].map(String)
      ),
    );
    assert.match(chartSvg(body, "calibration"), /<svg/);
    const churn = tableRows(body, "churn-risk");
    assert.equal(churn.length, 10);
    const probabilities = churn.map((r) => Number(r[1]));
    assert.deepEqual(probabilities, [...probabilities].sort((x, y) => y - x));
    assert.match(churn[0]![0]!, /^c\d+@example\.com$/);
    // Each listed probability is the customer's own, as her insights give it.
    const own = await (await ctx.request(`/cdp/customers/${churn[0]![0]}/insights`, a.key)).json();
    assert.ok(Math.abs(own.insights.churn.probability - probabilities[0]!) <= 0.002);
  }, { ...APP_ENV, PREDICTIONS_MIN_CUSTOMERS: "40" });
});

Deno.test("insights page: a brand short of the rules sees the reasons", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const s = await openDashboard(ctx, a.scope!);
    await fitBrandPredictions(
      { sql: ctx.sql, kv: ctx.kv, now: ctx.clock.now, settings: ctx.config.predictions },
      a.brandId,
    );
    assert.match(
      textOf(await html(ctx, "/app/insights", s)),
      /Not enough data for predictions: 0 customers with completed orders; at least 500 needed/,
    );
  }, APP_ENV);
});
