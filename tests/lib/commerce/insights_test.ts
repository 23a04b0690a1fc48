import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { importNdjson } from "../../../lib/commerce/import.ts";
import {
  atRiskCustomers,
  brandLtv,
  brandRfm,
  customerInsights,
  revenueByMonth,
  RFM_TIER_MAP,
  RFM_TIERS,
  rfmTier,
} from "../../../lib/commerce/insights.ts";
import { orderImport } from "../../../lib/commerce/orders.ts";
import {
  predictedInsights,
  replacePredictionModel,
} from "../../../lib/commerce/predictions/customer_predictions.ts";
import type { FittedModel } from "../../../lib/commerce/predictions/model_fit.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { withBrandDatabase } from "../../test_support.ts";

const newId = monotonicFactory();
const DAY = 86_400_000;
const D0 = Date.parse("2026-10-01T00:00:00Z");

/** Reads at `now` with no staleness: every read sees the writes before it. */
const at = (now: Date) => ({ now, maxStalenessSeconds: 0 });

let _orderCounter = 0;

/** An order line of `email`, `days` after D0. */
function order(email: string, total: string, days: number, state = "complete") {
  const id = String(++_orderCounter);
  return {
    external_id: id,
    number: `#${id}`,
    state,
    billing_status: state === "complete" ? "complete" : "billable",
    total,
    currency_code: "USD",
    created_at: new Date(D0 + days * DAY).toISOString(),
    customer: { email },
    line_items: [{ title: "Tee", quantity: 1, price: total, product_id: "P1" }],
  };
}

async function importOrders(sql: Sql, brandId: string, lines: unknown[]) {
  const bytes = new TextEncoder().encode(lines.map((l) => JSON.stringify(l)).join("\n"));
  const result = await importNdjson(
    sql,
    new Blob([bytes]).stream(),
    orderImport({ brandId, newId, now: new Date(D0) }),
  );
  assert.deepEqual(result.rejected, []);
}

async function contactOf(sql: Sql, brandId: string, email: string): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    select id from contacts where brand_id = ${brandId} and email = ${email}`;
  return row!.id;
}

Deno.test("rfmTier: FM is (F + M) / 2 rounded half up; every score triple has a tier", () => {
  assert.equal(rfmTier(5, 1, 1), "new");
  assert.equal(rfmTier(5, 5, 5), "champions");
  assert.equal(rfmTier(1, 1, 1), "dormant");
  // (4 + 5) / 2 = 4.5 rounds to 5; (2 + 3) / 2 = 2.5 rounds to 3.
  assert.equal(rfmTier(1, 4, 5), "previously_loyal");
  assert.equal(rfmTier(2, 2, 3), "at_risk");
  assert.equal(rfmTier(3, 1, 2), "needs_attention");
  for (let r = 1; r <= 5; r++) {
    assert.equal(RFM_TIER_MAP[r]!.length, 5);
    for (let f = 1; f <= 5; f++) {
      for (let m = 1; m <= 5; m++) {
        assert.ok(RFM_TIERS.includes(rfmTier(r, f, m)), `${r}${f}${m}`);
      }
    }
  }
});

Deno.test("brandLtv: buckets include their minimum, exclude their maximum; only completed orders count", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await importOrders(sql, brandId, [
      order("a@example.com", "99.99", 1),
      order("b@example.com", "100.00", 2),
      order("c@example.com", "249.99", 3),
      order("c@example.com", "0.01", 4),
      order("d@example.com", "999.99", 5),
      order("e@example.com", "1000.00", 6),
      order("f@example.com", "5000.00", 7, "pending"),
    ]);
    const ltv = await brandLtv(sql, brandId, at(new Date(D0 + 10 * DAY)));
    assert.equal(ltv.customer_count, 5);
    assert.equal(ltv.total_revenue, "2449.98");
    assert.equal(ltv.average_ltv, "490.00");
    assert.equal(ltv.currency_code, "USD");
    assert.deepEqual(
      ltv.distribution.map((b) => [b.label, b.customer_count]),
      [["0-100", 1], ["100-250", 1], ["250-500", 1], ["500-1000", 1], ["1000+", 1]],
    );
  });
});

Deno.test("brandLtv: a brand without orders is all zeros", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    const ltv = await brandLtv(sql, brandId, at(new Date(D0)));
    assert.equal(ltv.customer_count, 0);
    assert.equal(ltv.total_revenue, "0.00");
    assert.equal(ltv.average_ltv, "0.00");
    assert.ok(ltv.distribution.every((b) => b.customer_count === 0));
  });
});

Deno.test("RFM: scores are quintiles of the brand's customers, ties share a score", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    // Customer k orders once, on day k, for k * 10: R = M = k; one order each, so F ties at 5.
    await importOrders(
      sql,
      brandId,
      [1, 2, 3, 4, 5].map((k) => order(`c${k}@example.com`, `${k * 10}.00`, k)),
    );
    const now = new Date(D0 + 10 * DAY);
    const rfm = await brandRfm(sql, brandId, at(now));
    assert.equal(rfm.customer_count, 5);
    assert.deepEqual(rfm.scores.recency, { 1: 1, 2: 1, 3: 1, 4: 1, 5: 1 });
    assert.deepEqual(rfm.scores.frequency, { 1: 0, 2: 0, 3: 0, 4: 0, 5: 5 });
    assert.deepEqual(rfm.scores.monetary, { 1: 1, 2: 1, 3: 1, 4: 1, 5: 1 });
    // (R, FM): (1, 3) dormant, (2, 4) at_risk, (3, 4) loyal, (4, 5) and (5, 5) champions.
    assert.deepEqual(
      Object.entries(rfm.tiers).filter(([, n]) => n > 0).sort(),
      [["at_risk", 1], ["champions", 2], ["dormant", 1], ["loyal", 1]],
    );
    const one = await customerInsights(
      sql,
      brandId,
      await contactOf(sql, brandId, "c2@example.com"),
      at(now),
    );
    assert.deepEqual(
      [one.rfm?.recency_score, one.rfm?.frequency_score, one.rfm?.monetary_score, one.rfm?.tier],
      [2, 5, 2, "at_risk"],
    );
  });
});

Deno.test("churn: at risk past twice the customer's median gap, else the brand's", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    // A orders every 10 days (days 0, 10, 20); B once (day 0): the brand's median gap is 10.
    await importOrders(sql, brandId, [
      order("a@example.com", "10.00", 0),
      order("a@example.com", "10.00", 10),
      order("a@example.com", "10.00", 20),
      order("b@example.com", "50.00", 0),
    ]);
    const a = await contactOf(sql, brandId, "a@example.com");
    const b = await contactOf(sql, brandId, "b@example.com");

    const later = at(new Date(D0 + 45 * DAY));
    assert.deepEqual((await customerInsights(sql, brandId, a, later)).churn, {
      days_since_last_order: 25,
      median_inter_order_days: 10,
      brand_median_inter_order_days: 10,
      at_risk_score: 1.25,
      at_risk: true,
    });
    assert.deepEqual((await customerInsights(sql, brandId, b, later)).churn, {
      days_since_last_order: 45,
      median_inter_order_days: null,
      brand_median_inter_order_days: 10,
      at_risk_score: 2.25,
      at_risk: true,
    });

    const sooner = at(new Date(D0 + 35 * DAY));
    const churnA = (await customerInsights(sql, brandId, a, sooner)).churn!;
    assert.equal(churnA.at_risk_score, 0.75);
    assert.equal(churnA.at_risk, false);
    const risky = await atRiskCustomers(sql, brandId, { limit: 10, offset: 0 }, sooner);
    assert.deepEqual(risky.list.map((r) => [r.email, r.ltv, r.at_risk_score]), [
      ["b@example.com", "50.00", 1.75],
    ]);
    // At day 45 both are at risk, the more valuable first.
    const both = await atRiskCustomers(sql, brandId, { limit: 10, offset: 0 }, later);
    assert.deepEqual(both.list.map((r) => r.email), ["b@example.com", "a@example.com"]);
  });
});

Deno.test("customerInsights: no contact, or no completed order, is zeros and nulls", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await importOrders(sql, brandId, [order("p@example.com", "20.00", 1, "pending")]);
    const empty = {
      ltv: "0.00",
      order_count: 0,
      aov: "0.00",
      first_order_at: null,
      last_order_at: null,
      currency_code: null,
      rfm: null,
      top_products: [],
      churn: null,
    };
    const now = at(new Date(D0 + 5 * DAY));
    // The same bytes (key order included) as a JSON answer.
    assert.equal(
      JSON.stringify(await customerInsights(sql, brandId, null, now)),
      JSON.stringify(empty),
    );
    const pending = await contactOf(sql, brandId, "p@example.com");
    assert.equal(
      JSON.stringify(await customerInsights(sql, brandId, pending, now)),
      JSON.stringify(empty),
    );
  });
});

/** CDNOW's published parameters, alpha in days. */
const MODEL: FittedModel = {
  selected: "mbgnbd",
  bgnbd: { r: 0.243, alpha: 4.414 * 7, a: 0.793, b: 2.426 },
  mbgnbd: { r: 0.525, alpha: 6.183 * 7, a: 0.891, b: 1.614 },
  gamma_gamma: { p: 6.25, q: 3.74, gamma: 15.44 },
  time_unit: "day",
};

Deno.test("customerInsights with predictions: the same insights, plus predicted from her orders", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    // Two orders on day 0 (one order day), three products, then day 10 and day 30.
    await importOrders(sql, brandId, [
      {
        ...order("a@x.com", "10.00", 0),
        line_items: [{ title: "Mug", quantity: 2, price: "5.00", product_id: "P2" }],
      },
      order("a@x.com", "2.50", 0),
      {
        ...order("a@x.com", "7.25", 10),
        line_items: [{ title: "Cap", quantity: 1, price: "7.25", product_id: "P3" }],
      },
      order("a@x.com", "30.00", 30),
      order("a@x.com", "99.00", 31, "cancelled"),
      order("b@x.com", "50.00", 0),
    ]);
    const a = await contactOf(sql, brandId, "a@x.com");
    const now = new Date(D0 + 40 * DAY);
    const settings = { clvDiscountRate: 0 };

    // No model: predicted and churn.probability null, the rest as without predictions.
    const plain = await customerInsights(sql, brandId, a, at(now));
    assert.deepEqual(plain.top_products.map((p) => [p.product_id, p.revenue, p.quantity]), [
      ["P1", "32.50", 2],
      ["P2", "10.00", 2],
      ["P3", "7.25", 1],
    ]);
    const none = await customerInsights(sql, brandId, a, at(now), settings);
    assert.deepEqual(none, {
      ...plain,
      predicted: null,
      churn: { ...plain.churn!, probability: null },
    });

    await sql.begin((tx) => replacePredictionModel(tx, brandId, { model: MODEL, fittedAt: now }));
    const withModel = await customerInsights(sql, brandId, a, at(now), settings);
    const expected = predictedInsights(
      MODEL,
      { customer: a, days: [0, 10, 30].map((d) => D0 / DAY + d), totals: [12.5, 7.25, 30] },
      now,
      0,
    )!;
    assert.deepEqual(withModel, {
      ...plain,
      predicted: expected,
      churn: { ...plain.churn!, probability: Number((1 - expected.p_alive).toFixed(4)) },
    });
    // Apart from the predictions, the same bytes as a JSON answer (key order included).
    assert.equal(
      JSON.stringify({ ...withModel, predicted: undefined, churn: plain.churn }),
      JSON.stringify(plain),
    );
    // Without a contact or a completed order: zeros, and no predictions.
    const empty = await customerInsights(sql, brandId, null, at(now), settings);
    assert.equal(empty.predicted, null);
    assert.equal(empty.churn, null);
  });
});

Deno.test("customerInsights with predictions: a stale snapshot's missing customer still has her orders' predictions", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await importOrders(sql, brandId, [order("b@x.com", "50.00", 0)]);
    const now = new Date(D0 + 5 * DAY);
    await sql.begin((tx) => replacePredictionModel(tx, brandId, { model: MODEL, fittedAt: now }));
    await brandLtv(sql, brandId, at(now));
    await importOrders(sql, brandId, [order("new@x.com", "20.00", 4)]);
    const id = await contactOf(sql, brandId, "new@x.com");
    const stale = { now, maxStalenessSeconds: 3600, background: () => {} };
    const insights = await customerInsights(sql, brandId, id, stale, { clvDiscountRate: 0 });
    assert.equal(insights.order_count, 0);
    assert.deepEqual(
      insights.predicted,
      predictedInsights(MODEL, { customer: id, days: [D0 / DAY + 4], totals: [20] }, now, 0),
    );
  });
});

Deno.test("RFM: each tier's revenue is the exact LTV sum of its customers", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await importOrders(sql, brandId, [
      order("a@x.com", "10.10", 0),
      order("a@x.com", "0.05", 1),
      order("b@x.com", "20.25", 2),
      order("c@x.com", "30.00", 3),
      order("c@x.com", "999.99", 4, "cancelled"),
    ]);
    const now = new Date(D0 + 10 * DAY);
    const rfm = await brandRfm(sql, brandId, at(now));
    assert.deepEqual(Object.keys(rfm.tier_revenue), [...RFM_TIERS]);
    const expected: Record<string, number> = Object.fromEntries(RFM_TIERS.map((t) => [t, 0]));
    for (const [email, spend] of [["a@x.com", 1015], ["b@x.com", 2025], ["c@x.com", 3000]]) {
      const insights = await customerInsights(
        sql,
        brandId,
        await contactOf(sql, brandId, email as string),
        at(now),
      );
      expected[insights.rfm!.tier] = expected[insights.rfm!.tier]! + (spend as number);
    }
    for (const tier of RFM_TIERS) {
      assert.equal(rfm.tier_revenue[tier], (expected[tier]! / 100).toFixed(2), tier);
    }
  });
});

Deno.test("revenueByMonth: completed orders per UTC month, attributed or not, every month to now", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    const guest = { ...order("x@x.com", "5.00", 0), customer: undefined };
    await importOrders(sql, brandId, [
      order("a@x.com", "10.00", 0), // 2026-10-01
      order("a@x.com", "2.50", 30), // 2026-10-31
      order("b@x.com", "7.00", 31), // 2026-11-01
      order("b@x.com", "100.00", 31, "cancelled"),
      { ...guest, external_id: "guest" },
    ]);
    assert.deepEqual(await revenueByMonth(sql, brandId, at(new Date("2027-01-15T00:00:00Z"))), [
      { month: "2026-10", order_count: 3, revenue: "17.50" },
      { month: "2026-11", order_count: 1, revenue: "7.00" },
      { month: "2026-12", order_count: 0, revenue: "0.00" },
      { month: "2027-01", order_count: 0, revenue: "0.00" },
    ]);
  });
});

Deno.test("revenueByMonth: a brand without completed orders has no months", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    assert.deepEqual(await revenueByMonth(sql, brandId, at(new Date(D0))), []);
  });
});
