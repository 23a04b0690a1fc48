import assert from "node:assert/strict";
import {
  fitBrandModel,
  holdoutValidation,
  predictCustomer,
  selectedModel,
} from "../../../../lib/commerce/predictions/model_fit.ts";
import { customerHistories } from "../../../../lib/commerce/predictions/rfm_summary.ts";
import { CDNOW_CUT_OFF, cdnowOrders } from "./cdnow_fixture.ts";

const histories = customerHistories(cdnowOrders());

Deno.test("CDNOW: the 90-day holdout selects MBG/NBD", () => {
  const validation = holdoutValidation(histories, CDNOW_CUT_OFF)!;
  assert.equal(validation.holdout_from, "1997-07-03");
  assert.equal(validation.holdout_days, 90);
  assert.equal(validation.actual_repeat_orders, 704);
  assert.ok(Math.abs(validation.mbgnbd_error - 90.6) < 0.1, String(validation.mbgnbd_error));
  assert.ok(Math.abs(validation.bgnbd_error - 93.1) < 0.1, String(validation.bgnbd_error));
  assert.equal(selectedModel(validation), "mbgnbd");
  assert.deepEqual(validation.by_frequency.map((g) => g.x), [
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "6",
    "7+",
  ]);
  assert.equal(validation.by_frequency.reduce((s, g) => s + g.customers, 0), 2357);
  for (const g of validation.by_frequency) assert.equal(g.predicted, g.predicted_mbgnbd);
});

Deno.test("holdout: customers first seen inside it are left out; BG/NBD without a validation", () => {
  const only = customerHistories([{ customer: "late", day: CDNOW_CUT_OFF - 10, total: 5 }]);
  assert.equal(holdoutValidation(only, CDNOW_CUT_OFF), null);
  assert.equal(selectedModel(null), "bgnbd");
});

Deno.test("CDNOW: a brand fit predicts per customer with the selected model", () => {
  const fit = fitBrandModel(histories, CDNOW_CUT_OFF);
  assert.equal(fit.model.selected, "mbgnbd");
  assert.equal(fit.rows.length, 2357);
  const row = { x: 2, t_x: 213, T: 272, spend: 22.35 };
  const prediction = predictCustomer(fit.model, row, 20);
  assert.equal(prediction.model, "mbgnbd");
  assert.ok(prediction.p_alive > 0.5 && prediction.p_alive < 1);
  assert.ok(prediction.expected_orders_365d > prediction.expected_orders_90d);
  const gg = fit.model.gamma_gamma!;
  const spend = gg.p * (gg.gamma + 2 * 22.35) / (gg.p * 2 + gg.q - 1);
  assert.ok(
    Math.abs(prediction.predicted_clv_365d - prediction.expected_orders_365d * spend) < 1e-9,
  );
  const discounted = predictCustomer(fit.model, row, 20, 0.21);
  assert.ok(Math.abs(discounted.predicted_clv_365d - prediction.predicted_clv_365d / 1.1) < 1e-9);
  // A long-silent one-time buyer is likely gone under MBG/NBD: no expected next order.
  const gone = predictCustomer(fit.model, { x: 0, t_x: 0, T: 2000, spend: 0 }, 20);
  assert.ok(gone.p_alive < 0.5);
  assert.equal(gone.expected_wait_days, null);
});
