/**
 * Operator commands for brands, their API keys and their usage.
 *
 * @module
 */
import { monotonicFactory } from "ulid";
import { issueApiKey } from "../tenancy/api_keys.ts";
import { createBrand, setBrand } from "../tenancy/brands.ts";
import { openTokenCipher } from "../tenancy/token_cipher.ts";
import { summarizeUsage } from "../http/usage.ts";
import { type Commands, defineCommand, parseFlags, requireBrand, UsageError } from "./command.ts";

/** `brand create`, `brand set`, `key issue`, `usage`. */
export const brandCommands: Commands = {
  "brand create": defineCommand({
    usage: `--name NAME [--shop DOMAIN] [--access-token TOKEN] [--beta]`,
    parse(args) {
      const { values } = parseFlags(args, {
        name: { type: "string" },
        shop: { type: "string" },
        "access-token": { type: "string" },
        beta: { type: "boolean" },
      });
      if (values.name === undefined) throw new UsageError("--name is required");
      return {
        name: values.name as string,
        shop: values.shop as string | undefined,
        accessToken: values["access-token"] as string | undefined,
        beta: values.beta === true,
      };
    },
    async run(stores, input, config) {
      const cipher = await openTokenCipher(stores.kv, config.tokenEncryptionKey);
      const deps = { sql: stores.sql, newId: monotonicFactory(), now: () => new Date(), cipher };
      return await createBrand(deps, input);
    },
  }),

  "brand set": defineCommand({
    usage: `--brand ID [--beta on|off] [--integration connected|disconnected]`,
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        beta: { type: "string" },
        integration: { type: "string" },
      });
      if (values.brand === undefined) throw new UsageError("--brand is required");
      const beta = values.beta as string | undefined;
      if (beta !== undefined && beta !== "on" && beta !== "off") {
        throw new UsageError("--beta takes on or off");
      }
      const integration = values.integration as "connected" | "disconnected" | undefined;
      if (
        integration !== undefined && integration !== "connected" && integration !== "disconnected"
      ) {
        throw new UsageError("--integration takes connected or disconnected");
      }
      return {
        brandId: values.brand as string,
        beta: beta === undefined ? undefined : beta === "on",
        integration,
      };
    },
    async run(stores, input) {
      return await setBrand({ sql: stores.sql, kv: stores.kv, now: () => new Date() }, input);
    },
  }),

  "key issue": defineCommand({
    usage: `--brand ID [--name LABEL]`,
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" }, name: { type: "string" } });
      if (values.brand === undefined) throw new UsageError("--brand is required");
      return { brandId: values.brand as string, name: (values.name as string | undefined) ?? null };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      const deps = { kv: stores.kv, now: () => new Date(), newId: monotonicFactory() };
      const issued = await issueApiKey(deps, input);
      return { id: issued.id, key: issued.key, prefix: issued.prefix };
    },
  }),

  "usage": defineCommand({
    usage: `--brand ID [--from YYYY-MM-DD] [--to YYYY-MM-DD]`,
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        from: { type: "string" },
        to: { type: "string" },
      });
      if (values.brand === undefined) throw new UsageError("--brand is required");
      for (const flag of ["from", "to"] as const) {
        const day = values[flag] as string | undefined;
        if (day !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(day)) {
          throw new UsageError(`--${flag} takes a day as YYYY-MM-DD`);
        }
      }
      return {
        brandId: values.brand as string,
        from: values.from as string | undefined,
        to: values.to as string | undefined,
      };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      const rows = await summarizeUsage(stores.kv, input.brandId, input);
      return {
        brand: input.brandId,
        from: input.from ?? null,
        to: input.to ?? null,
        total: rows.reduce((sum, row) => sum + row.requests, 0),
        days: rows,
      };
    },
  }),
};
