/**
 * Backfill benchmark: a Shopify history backfill (`shop sync`, through the Bulk Operations API)
 * of 1,000,000 orders of 200,000 customers, beside `orders import` of the same orders, in the same
 * run, on the same server.
 *
 *   deno task bench:backfill      (deno run -A --unstable-kv bench/backfill_load.ts)
 *
 * 1. Writes the orders as Shopify's bulk JSONL (orders with two line item children each, on lines of
 *    their own with `__parentId`, every other order's first item before it) and the same orders as
 *    `orders import` NDJSON (mapped by the backfill's own mapping), and the customers' JSONL. Not
 *    measured. Each run below gets a database of its own (`bench_backfill_<random>` on
 *    BENCH_DATABASE_URL, migrated, not measured), so none pays for another's rows.
 * 2. `orders import`: `importNdjson` + `orderImport` with COPY (what `deno task admin orders import`
 *    runs on a server) of the NDJSON into an empty brand.
 * 3. Backfill: `runShopSync` of the orders (`--only orders`) into an empty brand, against a
 *    fake Admin API on loopback that serves the JSONL from disk: the mutation, the poll, the
 *    download, the regrouping through partition files, the writes. Its orders/s beside the
 *    import's: PASS when at least 80% of it.
 * 4. The full sync (customers, then orders) into an empty brand, reported for information.
 *
 * Prints progress on stderr and a markdown table on stdout; the target is reported PASS/FAIL,
 * never asserted. Exit code 1 only for an invalid run (an error or counts that differ).
 *
 * Environment (optional): BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test;
 * loopback only), BENCH_BACKFILL_ORDERS (1000000), BENCH_BACKFILL_CUSTOMERS (200000),
 * BENCH_BACKFILL_FULL (1; 0 skips step 4), BENCH_KEEP_DATABASE (1).
 */
import postgres from "postgres";
import { monotonicFactory } from "ulid";
import { importNdjson } from "../lib/commerce/import.ts";
import { orderImport } from "../lib/commerce/orders.ts";
import { createShopifyAdmin } from "../lib/shopify/admin_client.ts";
import { mapBulkOrder } from "../lib/shopify/bulk_mapping.ts";
import { runShopSync, type ShopSyncDeps, type ShopSyncResult } from "../lib/shopify/shop_sync.ts";
import { connectPostgres, type Sql } from "../lib/store/db.ts";
import { migrate } from "../lib/store/migrations.ts";
import { openTokenCipher } from "../lib/tenancy/token_cipher.ts";
import {
  bulkCustomer,
  bulkLineItem,
  bulkOrder,
  jsonl,
  startFakeBulkApi,
} from "../tests/lib/shopify/fake_bulk_api.ts";
import { intEnv, startBenchRun } from "./bench_support.ts";

const PG_URL = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const ORDERS = intEnv("BENCH_BACKFILL_ORDERS", 1_000_000);
const CUSTOMERS = intEnv("BENCH_BACKFILL_CUSTOMERS", 200_000);
const FULL = (Deno.env.get("BENCH_BACKFILL_FULL") ?? "1") !== "0";
const KEEP = Deno.env.get("BENCH_KEEP_DATABASE") === "1";
/** The backfill's orders/s must be at least this share of the import's. */
const TARGET_SHARE = 0.8;
const SHOP = "backfill-bench.myshopify.com";
const TOKEN = "shpat_backfill_bench";

const run = startBenchRun("backfill", 24 * 3_600_000);
const progress = run.progress;

/** Writes the bulk JSONL of the orders, the same orders as import NDJSON, and the customers. */
async function writeFiles(
  dir: string,
): Promise<{ bulk: string; ndjson: string; customers: string }> {
  const paths = {
    bulk: `${dir}/orders.jsonl`,
    ndjson: `${dir}/orders.ndjson`,
    customers: `${dir}/customers.jsonl`,
  };
  const bulk = await Deno.open(paths.bulk, { write: true, create: true, truncate: true });
  const ndjson = await Deno.open(paths.ndjson, { write: true, create: true, truncate: true });
  const customers = await Deno.open(paths.customers, { write: true, create: true, truncate: true });
  const encoder = new TextEncoder();
  const write = async (file: Deno.FsFile, text: string) => {
    const bytes = encoder.encode(text);
    for (let offset = 0; offset < bytes.length;) offset += await file.write(bytes.subarray(offset));
  };
  try {
    let bulkText = "";
    let ndjsonText = "";
    for (let n = 1; n <= ORDERS; n++) {
      const order = bulkOrder(n, {}, CUSTOMERS);
      const items = [bulkLineItem(n, 0), bulkLineItem(n, 1)];
      if (n % 2 === 0) bulkText += jsonl(items[0]) + jsonl(order) + jsonl(items[1]);
      else bulkText += jsonl(order) + jsonl(items[0]) + jsonl(items[1]);
      ndjsonText += `${JSON.stringify(mapBulkOrder(order, items))}\n`;
      if (n % 5_000 === 0 || n === ORDERS) {
        await write(bulk, bulkText);
        await write(ndjson, ndjsonText);
        bulkText = "";
        ndjsonText = "";
      }
    }
    let customerText = "";
    for (let n = 0; n < CUSTOMERS; n++) {
      customerText += jsonl(bulkCustomer(500_000 + n));
      if (n % 5_000 === 4_999 || n === CUSTOMERS - 1) {
        await write(customers, customerText);
        customerText = "";
      }
    }
  } finally {
    bulk.close();
    ndjson.close();
    customers.close();
  }
  return paths;
}

async function orderCount(sql: Sql, brandId: string): Promise<number> {
  const [row] = await sql`select count(*)::int as n from orders where brand_id = ${brandId}`;
  return row!.n;
}

const BRAND = "brand_bench";

/**
 * Runs `fn` on a database of its own, created and migrated (not measured), with the brand and its
 * connected shop: every run starts from the same empty tables, whichever ran before it.
 */
async function onFreshDatabase<T>(
  admin: Sql,
  token: string,
  fn: (sql: Sql) => Promise<T>,
): Promise<T> {
  const name = `bench_backfill_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin`create database ${admin(name)}`;
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  // The driver as the service and `deno task admin` open it (lib/store/db.ts).
  const sql = connectPostgres(url.toString(), 4);
  try {
    await migrate(sql);
    await sql`insert into brands (id, name) values (${BRAND}, 'bench')`;
    await sql`
      insert into integrations (id, integration_id, brand_id, shop_domain, status, connected_at,
                                access_token_ciphertext)
      values ('int_bench', gen_random_uuid(), ${BRAND}, ${SHOP}, 'connected', now(), ${token})`;
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 5 });
    if (!KEEP) await admin`drop database if exists ${admin(name)} with (force)`;
    else progress(`kept ${name}`);
  }
}

async function main(): Promise<number> {
  const host = new URL(PG_URL).hostname;
  if (!["127.0.0.1", "localhost"].includes(host)) throw new Error("loopback only");
  const admin = postgres(PG_URL, { onnotice: () => {}, max: 1 }) as unknown as Sql;
  const tmp = await Deno.makeTempDir({ prefix: "backfill_load" });
  const kv = await Deno.openKv(":memory:");
  const fake = startFakeBulkApi(TOKEN);
  let invalid = false;
  try {
    const cipher = await openTokenCipher(kv, undefined);
    const token = await cipher.encrypt(TOKEN);
    progress(`writing ${ORDERS} orders (${CUSTOMERS} customers) as bulk JSONL and NDJSON`);
    const paths = await writeFiles(tmp);
    const bytes = (await Deno.stat(paths.bulk)).size;
    progress(`  bulk JSONL ${(bytes / 1e6).toFixed(0)} MB`);
    fake.pollsUntilDone = 0;
    fake.objectCounts = { orders: ORDERS * 3, customers: CUSTOMERS };
    fake.files.orders = () => Deno.openSync(paths.bulk).readable;
    fake.files.customers = () => Deno.openSync(paths.customers).readable;

    progress("orders import");
    const imported = await onFreshDatabase(admin, token, async (sql) => {
      const t0 = performance.now();
      const result = await importNdjson(
        sql,
        (await Deno.open(paths.ndjson)).readable,
        orderImport({ brandId: BRAND, newId: monotonicFactory(), now: new Date(), copy: true }),
      );
      const ms = performance.now() - t0;
      return { ms, result, stored: await orderCount(sql, BRAND) };
    });
    progress(`  ${imported.result.imported} in ${imported.ms.toFixed(0)} ms`);

    const sync = (only: "orders" | null) =>
      onFreshDatabase(admin, token, async (sql) => {
        const deps: ShopSyncDeps = {
          sql,
          kv,
          client: createShopifyAdmin({ adminOrigin: fake.origin, apiVersion: fake.apiVersion }),
          cipher,
          now: () => new Date(),
          newId: monotonicFactory(),
          copy: true,
          tempDir: tmp,
          onProgress: (p) => {
            if (p.step !== "bulk" && p.count % 200_000 === 0 && p.count > 0) {
              progress(`  ${p.phase}: ${p.count} ${p.step}`);
            }
          },
        };
        const t0 = performance.now();
        const result: ShopSyncResult = await runShopSync(deps, {
          runId: crypto.randomUUID(),
          brandId: BRAND,
          since: null,
          only,
        });
        const ms = performance.now() - t0;
        return { ms, result, stored: await orderCount(sql, BRAND) };
      });
    progress("backfill (orders)");
    const backfill = await sync("orders");
    progress(`  ${backfill.result.orders} in ${backfill.ms.toFixed(0)} ms`);

    let full: Awaited<ReturnType<typeof sync>> | undefined;
    if (FULL) {
      progress("full sync (customers, then orders)");
      full = await sync(null);
      progress(
        `  ${full.result.customers} customers, ${full.result.orders} orders in ${
          full.ms.toFixed(0)
        } ms`,
      );
    }

    const counts = [
      imported.result.imported,
      imported.stored,
      backfill.result.orders,
      backfill.stored,
      ...(full ? [full.result.orders, full.stored] : []),
    ];
    invalid ||= counts.some((n) => n !== ORDERS) || imported.result.rejected.length > 0 ||
      backfill.result.rejected.length > 0 || backfill.result.lineItems !== 2 * ORDERS;
    if (invalid) progress(`counts differ: ${counts.join(", ")}`);

    const importRate = (ORDERS / imported.ms) * 1000;
    const backfillRate = (ORDERS / backfill.ms) * 1000;
    const share = backfillRate / importRate;
    const out = [
      `Backfill of ${ORDERS} orders (${CUSTOMERS} customers, 2 line items each, ${
        (bytes / 1e6).toFixed(0)
      } MB of bulk JSONL) on PostgreSQL, each run on a fresh database:`,
      "",
      "| Run | orders/s | target | verdict |",
      "| --- | -------- | ------ | ------- |",
      `| \`orders import\` of the same orders (NDJSON, COPY) | ${importRate.toFixed(0)} | — | — |`,
      `| backfill, \`--only orders\` (bulk query, download, regroup, writes) | ${
        backfillRate.toFixed(0)
      } (${(share * 100).toFixed(0)}%) | ≥ ${TARGET_SHARE * 100}% of the import | ${
        share >= TARGET_SHARE ? "PASS" : "FAIL"
      } |`,
    ];
    if (full) {
      out.push(
        `| full sync: ${CUSTOMERS} customers, then the orders (${
          (full.ms / 1000).toFixed(1)
        } s in all) | ${((ORDERS / full.ms) * 1000).toFixed(0)} | — | — |`,
      );
    }
    console.log(out.join("\n"));
  } catch (err) {
    console.error(err);
    invalid = true;
  } finally {
    await fake.close();
    kv.close();
    await admin.end({ timeout: 5 });
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
  return invalid ? 1 : 0;
}

Deno.exit(await main());
