/**
 * Operator commands that load a brand's commerce history from NDJSON (docs/commerce.md).
 *
 * @module
 */
import { monotonicFactory } from "ulid";
import { importNdjson } from "../commerce/import.ts";
import { orderImport } from "../commerce/orders.ts";
import { subscriptionImport } from "../commerce/subscriptions.ts";
import { type Commands, defineCommand, parseFlags, requireBrand, UsageError } from "./command.ts";

/** `orders import`, `subscriptions import`. */
export const importCommands: Commands = {
  "orders import": _importCommand("orders"),
  "subscriptions import": _importCommand("subscriptions"),
};

function _importCommand(kind: "orders" | "subscriptions") {
  return defineCommand({
    usage: "--brand ID FILE          (NDJSON; - reads stdin)",
    parse(args) {
      const { values, positionals } = parseFlags(args, { brand: { type: "string" } }, true);
      if (values.brand === undefined) throw new UsageError("--brand is required");
      if (positionals.length !== 1) throw new UsageError("give one FILE (or - for stdin)");
      return { brandId: values.brand as string, file: positionals[0]! };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      const stream = input.file === "-"
        ? Deno.stdin.readable
        : (await Deno.open(input.file)).readable;
      const steps = {
        brandId: input.brandId,
        newId: monotonicFactory(),
        now: new Date(),
        copy: stores.database.mode === "postgres",
      };
      return kind === "orders"
        ? await importNdjson(stores.sql, stream, orderImport(steps))
        : await importNdjson(stores.sql, stream, subscriptionImport(steps));
    },
  });
}
