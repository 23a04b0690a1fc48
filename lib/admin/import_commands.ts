/**
 * Operator commands that load a brand's commerce history from NDJSON (docs/commerce.md).
 *
 * @module
 */
import { monotonicFactory } from "ulid";
import { importNdjson } from "../commerce/import.ts";
import { orderImport } from "../commerce/orders.ts";
import { enqueuePredictionsFit } from "../commerce/predictions/fit_job.ts";
import { subscriptionImport } from "../commerce/subscriptions.ts";
import { brandAndFile, type Commands, defineCommand, requireWritableBrand } from "./command.ts";

/** `orders import`, `subscriptions import`. */
export const importCommands: Commands = {
  "orders import": _importCommand("orders"),
  "subscriptions import": _importCommand("subscriptions"),
};

function _importCommand(kind: "orders" | "subscriptions") {
  return defineCommand({
    usage: "--brand ID FILE          (NDJSON; - reads stdin)",
    summary: `Imports a brand's ${kind} from NDJSON (docs/commerce.md); a line already ` +
      "imported is updated, a bad line is reported and skipped.",
    parse: brandAndFile,
    input: (parsed) => parsed.file,
    async run(stores, input, _config, io) {
      await requireWritableBrand(stores, input.brandId);
      const stream = await io.open(input.file);
      const steps = {
        brandId: input.brandId,
        newId: monotonicFactory(),
        now: new Date(),
        copy: stores.database.mode === "postgres",
      };
      if (kind === "subscriptions") {
        return await importNdjson(stores.sql, stream, subscriptionImport(steps));
      }
      const result = await importNdjson(stores.sql, stream, orderImport(steps));
      // The service refits the brand's predictions on the imported history.
      await enqueuePredictionsFit(stores.queue, input.brandId, new Date());
      return result;
    },
  });
}
