/**
 * Operator command for the messages refused inside accepted ingest requests: list
 * (lib/ingest/rejected_messages.ts, docs/operations.md).
 *
 * @module
 */
import { listRejectedMessages, rejectedCount } from "../ingest/rejected_messages.ts";
import {
  brandIdArg,
  type Commands,
  defineCommand,
  limitArg,
  parseFlags,
  requiredFlag,
} from "./command.ts";

/** `rejected list`. */
export const rejectedCommands: Commands = {
  "rejected list": defineCommand({
    usage: `--brand ID [--limit N]`,
    summary: "Lists the messages refused inside a brand's accepted requests (newest first, " +
      "default 50), with their reasons and how many were refused in all.",
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        limit: { type: "string" },
      });
      return {
        brandId: brandIdArg(requiredFlag(values, "brand")),
        limit: limitArg(values.limit, 50),
      };
    },
    async run(stores, input) {
      const [count, messages] = await Promise.all([
        rejectedCount(stores.kv, input.brandId),
        listRejectedMessages(stores.kv, input.brandId, input.limit),
      ]);
      return { brand: input.brandId, count, rejected: messages };
    },
  }),
};
