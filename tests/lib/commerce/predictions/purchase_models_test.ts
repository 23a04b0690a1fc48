import assert from "node:assert/strict";
import {
  conditionalExpectedPurchases,
  expectedPurchases,
  expectedWaitDays,
  fitPurchaseModel,
  logLikelihood,
  pAlive,
  type PurchaseParams,
} from "../../../../lib/commerce/predictions/purchase_models.ts";
import { customerHistories, rfmSummary } from "../../../../lib/commerce/predictions/rfm_summary.ts";
import { assertWithin1Percent, CDNOW_CUT_OFF, cdnowOrders } from "./cdnow_fixture.ts";

const rows = rfmSummary(customerHistories(cdnowOrders()), CDNOW_CUT_OFF);

// Published estimates, time in weeks (alpha × 7 in days).
const BGNBD_WEEKS = { r: 0.243, alpha: 4.414, a: 0.793, b: 2.426 };
const MBGNBD_WEEKS = { r: 0.525, alpha: 6.183, a: 0.891, b: 1.614 };
const inDays = (p: PurchaseParams) => ({ ...p, alpha: p.alpha * 7 });

function assertParams(found: PurchaseParams, weeks: PurchaseParams, what: string) {
  assertWithin1Percent(found.r, weeks.r, `${what} r`);
  assertWithin1Percent(found.alpha / 7, weeks.alpha, `${what} alpha`);
  assertWithin1Percent(found.a, weeks.a, `${what} a`);
  assertWithin1Percent(found.b, weeks.b, `${what} b`);
}

Deno.test("CDNOW: BG/NBD reproduces Fader, Hardie and Lee (2005) within 1%", () => {
  assertParams(fitPurchaseModel("bgnbd", rows).params, BGNBD_WEEKS, "BG/NBD");
});

Deno.test("CDNOW: MBG/NBD reproduces BTYDplus' estimates within 1%", () => {
  assertParams(fitPurchaseModel("mbgnbd", rows).params, MBGNBD_WEEKS, "MBG/NBD");
});

Deno.test("CDNOW: counting same-day purchases apart moves the BG/NBD fit off the published one", () => {
  // Every purchase its own transaction: what a per-order (not per-day) summary would fit.
  const purchases = new Map<string, number>();
  for (const order of cdnowOrders()) {
    if (order.day <= CDNOW_CUT_OFF) {
      purchases.set(order.customer, (purchases.get(order.customer) ?? 0) + 1);
    }
  }
  const perOrder = rows.map((row) => ({ ...row, x: purchases.get(row.customer)! - 1 }));
  const fit = fitPurchaseModel("bgnbd", perOrder).params;
  assert.throws(() => assertParams(fit, BGNBD_WEEKS, "per order"));
});

Deno.test("the fit is deterministic", () => {
  assert.deepEqual(fitPurchaseModel("mbgnbd", rows), fitPurchaseModel("mbgnbd", rows));
});

Deno.test("the fit's log-likelihood is the published maximum's", () => {
  const fit = fitPurchaseModel("bgnbd", rows);
  // The published point (in days) is within rounding of the maximum: no better, barely worse.
  const atPublished = rows.reduce(
    (sum, row) => sum + logLikelihood("bgnbd", inDays(BGNBD_WEEKS), row),
    0,
  );
  assert.ok(fit.logLikelihood >= atPublished);
  assert.ok(fit.logLikelihood - atPublished < 0.1);
});

Deno.test("CDNOW: conditional expectations match the published worked examples", () => {
  // Customer 1 of the sample: x = 2, t_x = 30.43 weeks, T = 38.86 weeks; the next 39 weeks.
  const row = { x: 2, t_x: 30.43 * 7, T: 38.86 * 7 };
  const bg = conditionalExpectedPurchases("bgnbd", inDays(BGNBD_WEEKS), row, 39 * 7);
  assert.ok(Math.abs(bg - 1.226) < 0.001, String(bg)); // Hardie's spreadsheet
  const mbg = conditionalExpectedPurchases("mbgnbd", inDays(MBGNBD_WEEKS), row, 39 * 7);
  // lifetimes' MBG/NBD test reuses BG/NBD's 1.226; the MBG/NBD value is 1.263.
  assert.ok(Math.abs(mbg - 1.263) < 0.001, String(mbg));
});

Deno.test("P(alive): 1 for a one-time buyer under BG/NBD, below 1 under MBG/NBD", () => {
  const oneTime = { x: 0, t_x: 0, T: 200 };
  assert.equal(pAlive("bgnbd", inDays(BGNBD_WEEKS), oneTime), 1);
  const mbg = pAlive("mbgnbd", inDays(MBGNBD_WEEKS), oneTime);
  assert.ok(mbg > 0 && mbg < 1);
  // Long silence after repeat purchases lowers it under both.
  const recent = { x: 5, t_x: 190, T: 200 };
  const silent = { x: 5, t_x: 20, T: 200 };
  for (const model of ["bgnbd", "mbgnbd"] as const) {
    const params = inDays(model === "bgnbd" ? BGNBD_WEEKS : MBGNBD_WEEKS);
    assert.ok(pAlive(model, params, silent) < pAlive(model, params, recent));
  }
});

Deno.test("expected purchases: the curve rises and matches the published values", () => {
  for (const model of ["bgnbd", "mbgnbd"] as const) {
    const params = inDays(model === "bgnbd" ? BGNBD_WEEKS : MBGNBD_WEEKS);
    const e30 = expectedPurchases(model, params, 30);
    const e365 = expectedPurchases(model, params, 365);
    assert.ok(e30 > 0 && e365 > e30);
  }
  // Hardie's BG/NBD spreadsheet (also lifetimes' test, to 3 decimals): E[X(t)] at t weeks, under
  // the fitted (unrounded) parameters.
  const fitted = fitPurchaseModel("bgnbd", rows).params;
  const published = [[0.1429, 0.0078], [1, 0.0532], [3, 0.1506], [31.8571, 1.0405], [78, 1.8576]];
  for (const [weeks, expected] of published) {
    const e = expectedPurchases("bgnbd", fitted, weeks! * 7);
    assert.ok(Math.abs(e - expected!) < 0.0015, `${weeks}: ${e}`);
  }
  assert.equal(expectedWaitDays({ r: 1, alpha: 10, a: 1, b: 1 }, { x: 1, t_x: 5, T: 10 }), 10);
});
