/**
 * Operator commands of a brand's predictions: `insights fit` refits the brand's BG/NBD,
 * MBG/NBD and Gamma-Gamma models from its completed orders now and prints what
 * `GET /cdp/insights/predictions` then answers (docs/commerce.md).
 *
 * @module
 */
import { fitBrandPredictions, predictionsView } from "../commerce/predictions/brand_predictions.ts";
import {
  brandIdArg,
  type Commands,
  defineCommand,
  parseFlags,
  requireBrand,
  requiredFlag,
} from "./command.ts";

/** `insights fit`. */
export const insightsCommands: Commands = {
  "insights fit": defineCommand({
    usage: "--brand ID",
    summary: "Fits the brand's predictive models (BG/NBD, MBG/NBD, Gamma-Gamma) from its " +
      "completed orders now and prints the predictions (status, parameters, validation).",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" } });
      return { brandId: brandIdArg(requiredFlag(values, "brand")) };
    },
    async run(stores, input, config) {
      await requireBrand(stores, input.brandId);
      const stored = await fitBrandPredictions(
        { sql: stores.sql, kv: stores.kv, now: () => new Date(), settings: config.predictions },
        input.brandId,
      );
      return { brand: input.brandId, fit_ms: stored.fit_ms, ...predictionsView(stored) };
    },
  }),
};
