/**
 * Operator commands for brands, their API keys and their usage.
 *
 * @module
 */
import { monotonicFactory } from "ulid";
import { DomainError } from "../errors.ts";
import { apiKeyView, isLive, issueApiKey, listApiKeys, revokeApiKey } from "../tenancy/api_keys.ts";
import { createBrand, listBrands, setBrand } from "../tenancy/brands.ts";
import { summarizeUsage } from "../http/usage.ts";
import { readEventRetention, setEventRetention } from "../privacy/retention.ts";
import { droppedEventsByDay } from "../privacy/admission.ts";
import {
  brandIdArg,
  type Commands,
  dayArg,
  defineCommand,
  keyIdArg,
  parseFlags,
  requireBrand,
  requiredFlag,
  UsageError,
} from "./command.ts";

/** `brand create|set|list|show`, `key issue|list|revoke`, `usage`. */
export const brandCommands: Commands = {
  "brand create": defineCommand({
    usage: `--name NAME [--shop DOMAIN] [--access-token TOKEN] [--beta]`,
    summary: "Creates a brand; --shop connects its storefront (the scope), --beta grants " +
      "beta:cdp-commerce, the access token is stored encrypted.",
    parse(args) {
      const { values } = parseFlags(args, {
        name: { type: "string" },
        shop: { type: "string" },
        "access-token": { type: "string" },
        beta: { type: "boolean" },
      });
      return {
        name: requiredFlag(values, "name"),
        shop: values.shop as string | undefined,
        accessToken: values["access-token"] as string | undefined,
        beta: values.beta === true,
      };
    },
    async run(stores, input) {
      const deps = {
        sql: stores.sql,
        kv: stores.kv,
        newId: monotonicFactory(),
        now: () => new Date(),
        cipher: stores.cipher,
      };
      return await createBrand(deps, input);
    },
  }),

  "brand set": defineCommand({
    usage: `--brand ID [--beta on|off] [--integration connected|disconnected] ` +
      `[--event-retention-days N|off]`,
    summary: "Turns the commerce beta on or off, connects or disconnects the storefront, sets " +
      "how many days events are kept (off: for ever; enforced within a minute).",
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        beta: { type: "string" },
        integration: { type: "string" },
        "event-retention-days": { type: "string" },
      });
      const retention = values["event-retention-days"] as string | undefined;
      if (retention !== undefined && retention !== "off" && !/^[1-9]\d{0,5}$/.test(retention)) {
        throw new UsageError("--event-retention-days takes a number of days (1 or more) or off");
      }
      const brandId = brandIdArg(requiredFlag(values, "brand"));
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
        brandId,
        beta: beta === undefined ? undefined : beta === "on",
        integration,
        eventRetentionDays: retention === undefined
          ? undefined
          : retention === "off"
          ? null
          : Number(retention),
      };
    },
    async run(stores, input) {
      const { eventRetentionDays, ...rest } = input;
      if (eventRetentionDays !== undefined) {
        await setEventRetention(stores.sql, input.brandId, eventRetentionDays);
      }
      const view = await setBrand({ sql: stores.sql, kv: stores.kv, now: () => new Date() }, rest);
      return { ...view, event_retention_days: await readEventRetention(stores.sql, input.brandId) };
    },
  }),

  "brand list": defineCommand({
    usage: ``,
    summary: "Lists every brand, oldest first, with its shop, beta and integration state.",
    parse(args) {
      parseFlags(args, {});
      return {};
    },
    async run(stores) {
      return { brands: await listBrands(stores.sql) };
    },
  }),

  "brand show": defineCommand({
    usage: `--brand ID`,
    summary: "Shows one brand, with its number of API keys and of live ones.",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" } });
      return { brandId: brandIdArg(requiredFlag(values, "brand")) };
    },
    async run(stores, input) {
      const [brand] = await listBrands(stores.sql, input.brandId);
      if (!brand) throw new DomainError("not_found", `no brand ${input.brandId}`);
      const keys = await listApiKeys(stores.kv, input.brandId);
      const now = new Date();
      const live = keys.filter((key) => isLive(key, now)).length;
      return { ...brand, keys: { total: keys.length, live } };
    },
  }),

  "key issue": defineCommand({
    usage: `--brand ID [--name LABEL]`,
    summary: "Issues an API key for a brand; its plaintext is printed this once only.",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" }, name: { type: "string" } });
      return {
        brandId: brandIdArg(requiredFlag(values, "brand")),
        name: (values.name as string | undefined) ?? null,
      };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      const deps = { kv: stores.kv, now: () => new Date(), newId: monotonicFactory() };
      const issued = await issueApiKey(deps, input);
      return { id: issued.id, key: issued.key, prefix: issued.prefix };
    },
  }),

  "key list": defineCommand({
    usage: `--brand ID`,
    summary: "Lists a brand's API keys, oldest first: metadata only, never a key or its hash.",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" } });
      return { brandId: brandIdArg(requiredFlag(values, "brand")) };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      const keys = await listApiKeys(stores.kv, input.brandId);
      return { brand: input.brandId, keys: keys.map(apiKeyView) };
    },
  }),

  "key revoke": defineCommand({
    usage: `--brand ID --id KEYID`,
    summary: "Revokes a brand's API key: it stops working at the next request. Revoking " +
      "a revoked key changes nothing.",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" }, id: { type: "string" } });
      return {
        brandId: brandIdArg(requiredFlag(values, "brand")),
        keyId: keyIdArg(requiredFlag(values, "id")),
      };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      const revoked = await revokeApiKey({ kv: stores.kv, now: () => new Date() }, input);
      if (!revoked) {
        throw new DomainError("not_found", `brand ${input.brandId} has no key ${input.keyId}`);
      }
      return apiKeyView(revoked);
    },
  }),

  "usage": defineCommand({
    usage: `--brand ID [--from YYYY-MM-DD] [--to YYYY-MM-DD]`,
    summary: "Counts a brand's authenticated requests per UTC day and route family.",
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        from: { type: "string" },
        to: { type: "string" },
      });
      const from = values.from === undefined ? undefined : dayArg(values.from as string, "from");
      const to = values.to === undefined ? undefined : dayArg(values.to as string, "to");
      if (from !== undefined && to !== undefined && from > to) {
        throw new UsageError(`--from ${from} is after --to ${to}`);
      }
      return { brandId: brandIdArg(requiredFlag(values, "brand")), from, to };
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
        privacy_dropped: await droppedEventsByDay(stores.sql, input.brandId, input),
      };
    },
  }),
};
