import assert from "node:assert/strict";
import {
  fitBrandPredictions,
  loadHistories,
  readBrandPredictions,
} from "../../../../lib/commerce/predictions/brand_predictions.ts";
import { customerInsights } from "../../../../lib/commerce/insights.ts";
import {
  predictedInsights,
  withPredictions,
} from "../../../../lib/commerce/predictions/customer_predictions.ts";
import {
  type FittedModel,
  predictCustomer,
} from "../../../../lib/commerce/predictions/model_fit.ts";
import {
  type CustomerHistory,
  epochDay,
  meanDayTotal,
  rfmRow,
} from "../../../../lib/commerce/predictions/rfm_summary.ts";
import type { Sql } from "../../../../lib/store/db.ts";
import { withBrandDatabase, withKv } from "../../../test_support.ts";
import { loadOrders, orderLine as order, syntheticOrders } from "./order_fixture.ts";

const NOW = new Date("2026-11-21T12:00:00Z");
const DAY = 86_400_000;
const settings = { minCustomers: 40, minHistoryDays: 180, clvDiscountRate: 0 };

/** What the model gives the customer as of `now`, in insights.predicted's documented format. */
function modelsAnswer(model: FittedModel, history: CustomerHistory, now: Date, rate = 0) {
  const today = Math.max(epochDay(now), history.days.at(-1)!);
  const p = predictCustomer(model, rfmRow(history, today)!, meanDayTotal(history), rate);
  return {
    model: p.model,
    p_alive: Number(p.p_alive.toFixed(4)),
    expected_orders_90d: Number(p.expected_orders_90d.toFixed(4)),
    expected_orders_365d: Number(p.expected_orders_365d.toFixed(4)),
    predicted_clv_365d: p.predicted_clv_365d.toFixed(2),
    expected_next_order_at: p.expected_wait_days === null
      ? null
      : new Date(now.getTime() + p.expected_wait_days * DAY).toISOString(),
  };
}

/** Her predictions as the insights route serves them (`insights.predicted`). */
async function served(
  sql: Sql,
  brandId: string,
  contactId: string | null,
  now: Date,
  clvDiscountRate = 0,
) {
  const freshness = { now, maxStalenessSeconds: 0 };
  return (await customerInsights(sql, brandId, contactId, freshness, { clvDiscountRate }))
    .predicted;
}

async function contactOf(sql: Sql, brandId: string, email: string): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    select id from contacts where brand_id = ${brandId} and email = ${email}`;
  return row!.id;
}

/** Every customer's served predictions equal her model's as of `now`; answers how many. */
async function assertServedAreTheModels(
  deps: { sql: Sql; kv: Deno.Kv },
  brandId: string,
  now: Date,
): Promise<number> {
  const stored = await readBrandPredictions(deps.kv, brandId);
  assert.equal(stored?.status, "ready");
  const histories = await loadHistories(deps.sql, brandId);
  for (const history of histories) {
    assert.deepEqual(
      await served(deps.sql, brandId, history.customer, now),
      modelsAnswer(stored!.model!, history, now),
      history.customer,
    );
  }
  return histories.length;
}

Deno.test("predictedInsights: the model's answer as of the day, an order dated after it as today's", () => {
  const model: FittedModel = {
    selected: "bgnbd",
    bgnbd: { r: 0.243, alpha: 4.414 * 7, a: 0.793, b: 2.426 },
    mbgnbd: { r: 0.525, alpha: 6.183 * 7, a: 0.891, b: 1.614 },
    gamma_gamma: { p: 6.25, q: 3.74, gamma: 15.44 },
    time_unit: "day",
  };
  const today = epochDay(NOW);
  const history = { customer: "c", days: [today - 40, today - 12], totals: [20, 35.5] };
  assert.deepEqual(predictedInsights(model, history, NOW, 0), modelsAnswer(model, history, NOW));
  assert.equal(predictedInsights(model, { customer: "c", days: [], totals: [] }, NOW, 0), null);
  const skewed = { customer: "c", days: [today - 40, today + 1], totals: [20, 35.5] };
  const answer = predictedInsights(model, skewed, NOW, 0)!;
  assert.deepEqual(answer, modelsAnswer(model, skewed, NOW));
  assert.equal(answer.model, "bgnbd");
});

Deno.test("customer predictions: none without a ready model, a contact or a completed order", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await withKv(async (kv) => {
      await loadOrders(sql, brandId, syntheticOrders(10, 400, NOW));
      const c0 = await contactOf(sql, brandId, "c0@example.com");
      // Before any fit, then after one short of the rules.
      assert.equal(await served(sql, brandId, c0, NOW), null);
      const short = await fitBrandPredictions({ sql, kv, now: () => NOW, settings }, brandId);
      assert.equal(short.status, "insufficient_data");
      assert.equal(await served(sql, brandId, c0, NOW), null);
      assert.equal(await served(sql, brandId, null, NOW), null);

      await loadOrders(sql, brandId, [
        ...syntheticOrders(120, 500, NOW),
        order("cancelled-1", "cancelled@example.com", "2026-06-01T00:00:00Z", "5.00", "cancelled"),
      ]);
      assert.equal(
        (await fitBrandPredictions({ sql, kv, now: () => NOW, settings }, brandId)).status,
        "ready",
      );
      assert.notEqual(await served(sql, brandId, c0, NOW), null);
      const cancelled = await contactOf(sql, brandId, "cancelled@example.com");
      assert.equal(await served(sql, brandId, cancelled, NOW), null);
    });
  });
});

Deno.test("customer predictions: P(alive), expected orders, CLV (discounted) and churn probability", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await withKv(async (kv) => {
      await loadOrders(sql, brandId, syntheticOrders(120, 500, NOW));
      await fitBrandPredictions({ sql, kv, now: () => NOW, settings }, brandId);
      const id = await contactOf(sql, brandId, "c3@example.com");
      const predicted = (await served(sql, brandId, id, NOW))!;
      assert.ok(predicted.p_alive > 0 && predicted.p_alive <= 1);
      assert.ok(predicted.expected_orders_365d >= predicted.expected_orders_90d);
      assert.match(predicted.predicted_clv_365d, /^\d+\.\d{2}$/);
      if (predicted.p_alive >= 0.5) assert.ok(Date.parse(predicted.expected_next_order_at!) > +NOW);
      else assert.equal(predicted.expected_next_order_at, null);
      const discounted = (await served(sql, brandId, id, NOW, 0.21))!;
      const ratio = Number(discounted.predicted_clv_365d) / Number(predicted.predicted_clv_365d);
      assert.ok(Math.abs(ratio - 1 / 1.1) < 0.01, String(ratio));
      const churn = { at_risk: false };
      const merged = withPredictions({ ltv: "1.00", churn }, predicted);
      assert.equal(merged.predicted, predicted);
      assert.equal(merged.churn!.probability, Number((1 - predicted.p_alive).toFixed(4)));
      assert.deepEqual(withPredictions({ churn: null }, null), { churn: null, predicted: null });
      assert.equal(withPredictions({ churn }, null).churn!.probability, null);
    });
  });
});

Deno.test("served predictions are the refit model's, on any later day; a new order counts at once", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await withKv(async (kv) => {
      await loadOrders(sql, brandId, syntheticOrders(120, 500, NOW));
      await fitBrandPredictions({ sql, kv, now: () => NOW, settings }, brandId);
      const first = (await readBrandPredictions(kv, brandId))!;
      // Every customer, the fit's day and ten days later (T to the request's day, no refit).
      assert.equal(await assertServedAreTheModels({ sql, kv }, brandId, NOW), 120);
      const later = new Date(NOW.getTime() + 10 * DAY);
      await assertServedAreTheModels({ sql, kv }, brandId, later);

      // A new order before the next refit: the last fit's parameters, her orders as they are now.
      const id = await contactOf(sql, brandId, "c3@example.com");
      const before = (await served(sql, brandId, id, later))!;
      const [history] = (await loadHistories(sql, brandId)).filter((h) => h.customer === id);
      assert.ok(history!.days.at(-1)! < epochDay(later));
      await loadOrders(sql, brandId, [
        order("new-1", "c3@example.com", later.toISOString(), "64.00"),
      ]);
      const after = (await served(sql, brandId, id, later))!;
      assert.notDeepEqual(after, before);
      const withOrder = {
        customer: id,
        days: [...history!.days, epochDay(later)],
        totals: [...history!.totals, 64],
      };
      assert.deepEqual(after, modelsAnswer(first.model!, withOrder, later));
      assert.equal((await readBrandPredictions(kv, brandId))!.fitted_at, first.fitted_at);

      // The next refit's parameters replace the last ones for every customer.
      await fitBrandPredictions({ sql, kv, now: () => later, settings }, brandId);
      const second = (await readBrandPredictions(kv, brandId))!;
      assert.notDeepEqual(second.model, first.model);
      await assertServedAreTheModels({ sql, kv }, brandId, later);

      // A refit short of the rules takes them away.
      const strict = { ...settings, minCustomers: 100_000 };
      await fitBrandPredictions({ sql, kv, now: () => later, settings: strict }, brandId);
      assert.equal(await served(sql, brandId, id, later), null);
    });
  });
});
