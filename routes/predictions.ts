/**
 * The brand's predictive model (`GET /cdp/insights/predictions`): its status, the fitted
 * BG/NBD, MBG/NBD and Gamma-Gamma parameters, the holdout validation that selected the purchase
 * model, and the predicted-CLV distribution. Per-customer predictions are in the customer's
 * insights (routes/customers.ts). See docs/commerce.md.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { AppDeps } from "../lib/http/app_env.ts";
import { requireCommerce } from "../lib/http/auth.ts";
import {
  predictionsView,
  readBrandPredictions,
} from "../lib/commerce/predictions/brand_predictions.ts";
import { enqueuePredictionsFit } from "../lib/commerce/predictions/fit_job.ts";
import { apiKeySecurity, errorResponses, jsonResponse, newRouter } from "../lib/http/openapi.ts";

// Documented as a JSON object, without a schema for its fields.
const AnyObject = z.record(z.string(), z.unknown());

// The example: the CDNOW sample's fit (time in days), cut off at 1997-09-30.
const _group = (
  x: string,
  customers: number,
  actual: number,
  bgnbd: number,
  mbgnbd: number,
) => ({
  x,
  customers,
  actual,
  predicted: mbgnbd,
  predicted_bgnbd: bgnbd,
  predicted_mbgnbd: mbgnbd,
});

const predictions = createRoute({
  operationId: "getPredictions",
  method: "get",
  path: "/cdp/insights/predictions",
  tags: ["Insights"],
  summary: "The brand's fitted purchase and spend models, their holdout validation and CLV",
  description: "Status `ready` with the fitted model; `insufficient_data` with `reasons` when " +
    "the brand does not meet the eligibility rules (customers with completed orders, days of " +
    "history); `pending` before the first fit (the read queues one). `model.selected` is the purchase model whose " +
    "predicted repeat orders in the last 90 days (refitted on the history before them) were " +
    "closer to the actual ones; every per-customer prediction uses it.",
  security: apiKeySecurity,
  responses: {
    200: jsonResponse(AnyObject, "The brand's predictions", {
      scope: "acme.myshopify.com",
      status: "ready",
      reasons: [],
      fitted_at: "1997-09-30T06:00:00.000Z",
      cut_off: "1997-09-30",
      customers: 2357,
      model: {
        selected: "mbgnbd",
        bgnbd: { r: 0.242595, alpha: 30.895216, a: 0.792922, b: 2.425906 },
        mbgnbd: { r: 0.524843, alpha: 43.281605, a: 0.891359, b: 1.614002 },
        gamma_gamma: { p: 6.249572, q: 3.744224, gamma: 15.443522 },
        time_unit: "day",
      },
      validation: {
        holdout_days: 90,
        holdout_from: "1997-07-03",
        predicted_repeat_orders: 683.55,
        actual_repeat_orders: 704,
        by_frequency: [
          _group("0", 1411, 177, 184.08, 162.21),
          _group("1", 439, 137, 127.59, 137.07),
          _group("2", 207, 96, 104.13, 105.09),
          _group("3", 118, 64, 73.17, 71.87),
          _group("4", 63, 76, 58.64, 56.67),
          _group("5", 42, 46, 36.91, 35.29),
          _group("6", 30, 40, 30.8, 29.3),
          _group("7+", 47, 68, 91.64, 86.07),
        ],
        bgnbd_error: 93.08,
        mbgnbd_error: 90.62,
      },
      distribution: [
        { label: "0-100", min: 0, max: 100, customer_count: 2201 },
        { label: "100-250", min: 100, max: 250, customer_count: 118 },
        { label: "250-500", min: 250, max: 500, customer_count: 30 },
        { label: "500-1000", min: 500, max: 1000, customer_count: 7 },
        { label: "1000+", min: 1000, max: null, customer_count: 1 },
      ],
    }),
    ...errorResponses(401, 403, 405),
  },
});

/** `GET /cdp/insights/predictions`, behind the commerce gate. */
export function predictionRoutes(deps: AppDeps) {
  return newRouter().openapi(predictions, async (c) => {
    const scope = requireCommerce(c);
    const brandId = c.get("auth").brandId;
    const stored = await readBrandPredictions(deps.kv, brandId);
    // A brand never fitted (connected before predictions existed) need not wait for the daily refit.
    if (!stored) await enqueuePredictionsFit(deps.queue, brandId, deps.now());
    return c.json({ scope, ...predictionsView(stored) }, 200);
  });
}
