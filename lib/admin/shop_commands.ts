/**
 * Operator commands of a brand's shop: its Shopify history backfill, `shop sync` (in the
 * foreground, or queued for the service with `--background`) and `shop status`
 * (docs/commerce.md); its storefront origins, `shop origins` (docs/shopify_pixel.md).
 *
 * @module
 */
import { ulidSource } from "../ids.ts";
import type { SyncKind } from "../shopify/bulk_mapping.ts";
import {
  readShopSyncState,
  runShopSync,
  shopSyncDeps,
  type SyncProgress,
} from "../shopify/shop_sync.ts";
import { enqueueShopSync } from "../shopify/shop_sync_job.ts";
import { enqueuePredictionsFit } from "../commerce/predictions/fit_job.ts";
import { changeStorefrontOrigins, listStorefrontOrigins } from "../tenancy/storefront_origins.ts";
import {
  brandIdArg,
  type Commands,
  dayArg,
  defineCommand,
  parseFlags,
  requireBrand,
  requiredFlag,
  requireWritableBrand,
  UsageError,
} from "./command.ts";

/** `shop sync`, `shop status`, `shop origins`. */
export const shopCommands: Commands = {
  "shop sync": defineCommand({
    usage: "--brand ID [--since YYYY-MM-DD] [--only orders|customers] [--background]",
    summary: "Backfills the brand's Shopify customers and orders through the Bulk Operations " +
      "API (docs/commerce.md); safe to repeat; --background queues it for the service.",
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        since: { type: "string" },
        only: { type: "string" },
        background: { type: "boolean" },
      });
      const brandId = brandIdArg(requiredFlag(values, "brand"));
      const since = values.since === undefined ? null : dayArg(values.since as string, "since");
      const only = (values.only as string | undefined) ?? null;
      if (only !== null && only !== "orders" && only !== "customers") {
        throw new UsageError("--only must be orders or customers");
      }
      return {
        brandId,
        since,
        only: only as SyncKind | null,
        background: values.background === true,
      };
    },
    async run(stores, input, config) {
      await requireWritableBrand(stores, input.brandId);
      const request = {
        runId: ulidSource()(),
        brandId: input.brandId,
        since: input.since,
        only: input.only,
      };
      if (input.background) return await enqueueShopSync(stores.queue, request, new Date());
      const result = await runShopSync(
        shopSyncDeps(stores, config, { onProgress: _progressPrinter() }),
        request,
      );
      // The service refits the brand's predictions on the new history.
      await enqueuePredictionsFit(stores.queue, input.brandId, new Date());
      return result;
    },
  }),
  "shop status": defineCommand({
    usage: "--brand ID",
    summary: "Prints the state of the brand's latest history backfill (status, counts, last " +
      "error).",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" } });
      return { brandId: brandIdArg(requiredFlag(values, "brand")) };
    },
    async run(stores, input) {
      await requireBrand(stores, input.brandId);
      return await readShopSyncState(stores.kv, input.brandId) ??
        { brandId: input.brandId, status: "none" };
    },
  }),
  "shop origins": defineCommand({
    usage: "--brand ID [--add ORIGIN[,ORIGIN...]]... [--remove ORIGIN[,ORIGIN...]]...",
    summary: "Lists the custom storefront domains whose pages may send pixel events for the " +
      "brand's shop; --add and --remove change them (https://host[:port]), at once for the " +
      "service.",
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        add: { type: "string", multiple: true },
        remove: { type: "string", multiple: true },
      });
      return {
        brandId: brandIdArg(requiredFlag(values, "brand")),
        add: _originList(values.add, "add"),
        remove: _originList(values.remove, "remove"),
      };
    },
    async run(stores, input) {
      if (input.add.length === 0 && input.remove.length === 0) {
        return await listStorefrontOrigins(stores.sql, input.brandId);
      }
      return await changeStorefrontOrigins(
        { sql: stores.sql, kv: stores.kv, now: () => new Date() },
        input,
      );
    },
  }),
};

/** A repeatable flag's values, each comma-separated: the origins, trimmed, none empty. */
function _originList(values: unknown, flag: string): string[] {
  const given = (values ?? []) as string[];
  const origins = given.flatMap((value) => value.split(",")).map((origin) => origin.trim());
  if (origins.some((origin) => origin === "")) {
    throw new UsageError(`--${flag} takes origins, comma-separated (one is empty)`);
  }
  return origins;
}

/** Progress lines on stderr: each status change, and counts at most once a second. */
function _progressPrinter(): (progress: SyncProgress) => void {
  const started = new Map<string, number>();
  let lastStatus = "";
  let lastPrinted = 0;
  return (progress) => {
    const now = Date.now();
    if (progress.step === "bulk") {
      const { id, status, objectCount } = progress.operation;
      if (`${id} ${status}` === lastStatus && now - lastPrinted < 10_000) return;
      lastStatus = `${id} ${status}`;
      lastPrinted = now;
      console.error(`${progress.phase}: bulk operation ${id} ${status}, ${objectCount} objects`);
      return;
    }
    const key = `${progress.phase}:${progress.step}`;
    if (!started.has(key)) started.set(key, now);
    if (now - lastPrinted < 1_000) return;
    lastPrinted = now;
    const seconds = Math.max(0.001, (now - started.get(key)!) / 1000);
    const rate = Math.round(progress.count / seconds);
    const verb = progress.step === "read" ? "lines read" : "applied";
    console.error(`${progress.phase}: ${progress.count} ${verb} (${rate}/s)`);
  };
}
