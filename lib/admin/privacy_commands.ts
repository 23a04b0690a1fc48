/**
 * Operator commands of privacy: the audit of a brand's data-subject requests.
 *
 * @module
 */
import { listAudit } from "../privacy/audit.ts";
import {
  brandIdArg,
  type Commands,
  defineCommand,
  parseFlags,
  requireBrand,
  requiredFlag,
} from "./command.ts";

/** `privacy list`. */
export const privacyCommands: Commands = {
  "privacy list": defineCommand({
    usage: `--brand ID`,
    summary: "Lists a brand's privacy requests, newest first: who asked, when, the outcome and " +
      "counts, the identifier only as its keyed hash.",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" } });
      return { brandId: brandIdArg(requiredFlag(values, "brand")) };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      return { brand: input.brandId, requests: await listAudit(stores.sql, input.brandId) };
    },
  }),
};
