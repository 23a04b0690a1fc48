import assert from "node:assert/strict";
import {
  conditionalExpectedSpend,
  fitGammaGamma,
  spendLogLikelihood,
  spendRows,
} from "../../../../lib/commerce/predictions/gamma_gamma.ts";
import { customerHistories, rfmSummary } from "../../../../lib/commerce/predictions/rfm_summary.ts";
import { assertWithin1Percent, CDNOW_CUT_OFF, cdnowOrders } from "./cdnow_fixture.ts";

const rows = rfmSummary(customerHistories(cdnowOrders()), CDNOW_CUT_OFF);

Deno.test("CDNOW: Gamma-Gamma reproduces Fader and Hardie (2013) within 1%", () => {
  assert.equal(spendRows(rows).length, 946);
  const fit = fitGammaGamma(rows)!;
  assertWithin1Percent(fit.p, 6.25, "p");
  assertWithin1Percent(fit.q, 3.74, "q");
  assertWithin1Percent(fit.gamma, 15.44, "gamma");
  assert.deepEqual(fitGammaGamma(rows), fit);
});

Deno.test("Gamma-Gamma: the fit maximizes the likelihood and needs 2 repeat buyers", () => {
  const fit = fitGammaGamma(rows)!;
  const ll = (p: typeof fit) => spendRows(rows).reduce((s, r) => s + spendLogLikelihood(p, r), 0);
  assert.ok(ll(fit) >= ll({ p: 6.25, q: 3.74, gamma: 15.44 }));
  assert.equal(fitGammaGamma([{ x: 1, spend: 10 }, { x: 0, spend: 0 }]), null);
});

Deno.test("Gamma-Gamma: conditional spend weighs the customer's mean against the population's", () => {
  const params = { p: 6.25, q: 3.74, gamma: 15.44 };
  const population = conditionalExpectedSpend(params, { x: 0, spend: 0 });
  assert.ok(Math.abs(population - 6.25 * 15.44 / 2.74) < 1e-9);
  const heavy = conditionalExpectedSpend(params, { x: 10, spend: 100 });
  assert.ok(heavy > 90 && heavy < 100, String(heavy));
});
