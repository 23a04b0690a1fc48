/**
 * Commerce benchmark: order lists, the customer record and insights, brand insights and the
 * orders import on a brand of 1,000,000 orders and 200,000 customers (beside a brand B of 100,000
 * orders and 20,000 customers in the same tables), each timed side by side, in the same run, with
 * the SQL a DBA would write by hand (the floor), through the same `postgres` driver and database.
 *
 *   deno task bench:commerce      (deno run -A --unstable-kv bench/commerce_load.ts)
 *
 * 1. Creates `bench_commerce_<random>` on PostgreSQL (BENCH_DATABASE_URL), migrates it, generates
 *    contacts, orders (1 to 3 line items each), subscriptions and profiles set-based in SQL
 *    (secondary indexes dropped during the load, rebuilt), VACUUM ANALYZE. Not measured.
 * 2. Reads: each operation through the library functions the route calls, warm-ups, then
 *    iterations alternating which side runs first; p50/p99 of both and a check that they agree.
 *    Brand insights are read from their materialized snapshot (a current one, as between writes);
 *    the floor computes the same answer from the orders on every call. The refresh (what a read
 *    pays at most once per staleness window) is timed on its own.
 * 3. Import: an NDJSON file of BENCH_IMPORT_ORDERS (100,000) orders of 20,000 customers, written
 *    to a temp file first (not measured), imported with `importNdjson` + `orderImport` (what
 *    `deno task admin orders import` runs) into an empty brand, then again (re-import: every line
 *    replaces its order); the floor reads the same file, JSON.parse's each line and inserts the
 *    rows with plain multi-row INSERTs (no validation, no matching, no upsert) into another brand.
 *
 * The predictions refit of brand A (its completed orders read, then BG/NBD, MBG/NBD, Gamma-Gamma
 * and the validation fitted in a worker) is timed twice, and the customer insights are read as
 * the route reads them (predictions asked) beside the same call without predictions asked (the
 * "floor" of that row).
 *
 * Prints progress on stderr and markdown tables on stdout; targets are reported PASS/FAIL, never
 * asserted. Exit code 1 only for an invalid run (an error or answers that differ).
 *
 * Environment (optional): BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test;
 * loopback only), BENCH_ITERATIONS (30, reads), BENCH_P95_ITERATIONS (1000, the customer insights
 * with and without predictions), BENCH_BRAND_ITERATIONS (10, brand insights),
 * BENCH_IMPORT_ORDERS (100000), BENCH_SCALE (1; 0.1 for a quick run), BENCH_KEEP_DATABASE (1).
 */
import postgres from "postgres";
import { monotonicFactory } from "ulid";
import { customerRecord, resolveCustomer } from "../lib/commerce/customers.ts";
import { importNdjson } from "../lib/commerce/import.ts";
import {
  atRiskCustomers,
  brandLtv,
  brandProducts,
  brandRfm,
  customerInsights,
} from "../lib/commerce/insights.ts";
import { orderImport } from "../lib/commerce/orders.ts";
import { listOrders, resolveCustomerFilter } from "../lib/commerce/reads.ts";
import { markInsightsChanged, refreshSummaries } from "../lib/commerce/summaries.ts";
import {
  fitBrandPredictions,
  type PredictionSettings,
} from "../lib/commerce/predictions/brand_predictions.ts";
import { connectPostgres, type Sql } from "../lib/store/db.ts";
import { migrate } from "../lib/store/migrations.ts";
import { percentile, startBenchRun } from "./bench_support.ts";
import { generateCommerce } from "./commerce_data.ts";

const PG_URL = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const ITERATIONS = Number(Deno.env.get("BENCH_ITERATIONS") ?? 30);
const P95_ITERATIONS = Number(Deno.env.get("BENCH_P95_ITERATIONS") ?? 1000);
const BRAND_ITERATIONS = Number(Deno.env.get("BENCH_BRAND_ITERATIONS") ?? 10);
const SCALE = Number(Deno.env.get("BENCH_SCALE") ?? 1);
const IMPORT_ORDERS = Number(Deno.env.get("BENCH_IMPORT_ORDERS") ?? 100_000);
const KEEP = Deno.env.get("BENCH_KEEP_DATABASE") === "1";
const ORDERS_A = Math.round(1_000_000 * SCALE);
const CUSTOMERS_A = Math.round(200_000 * SCALE);
const ORDERS_B = Math.round(100_000 * SCALE);
const CUSTOMERS_B = Math.round(20_000 * SCALE);
const NOW = new Date();
const FRESH = { now: NOW, maxStalenessSeconds: 120 };

// Targets (reported, never asserted).
const CUSTOMER_P99_MS = 50;
const BRAND_P99_MS = 1000;
const IMPORT_ROWS_PER_S = 20_000;

const { progress } = startBenchRun("commerce_load", Infinity);

// --- measurement ----------------------------------------------------------------------------

interface Row {
  name: string;
  target: number | null;
  oursP50: number;
  oursP95: number;
  oursP99: number;
  floorP50: number;
  floorP95: number;
  floorP99: number;
  mismatch: string | null;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

async function measure<A, B>(pair: {
  name: string;
  target: number | null;
  iterations: number;
  ours: () => Promise<A>;
  floor: () => Promise<B>;
  same: (a: A, b: B) => string | null;
}): Promise<Row> {
  const first = await timed(pair.ours);
  const firstFloor = await timed(pair.floor);
  const mismatch = pair.same(first.value, firstFloor.value);
  const ours: number[] = [];
  const floor: number[] = [];
  for (let i = 0; i < pair.iterations; i++) {
    if (i % 2 === 0) {
      ours.push((await timed(pair.ours)).ms);
      floor.push((await timed(pair.floor)).ms);
    } else {
      floor.push((await timed(pair.floor)).ms);
      ours.push((await timed(pair.ours)).ms);
    }
  }
  const row = {
    name: pair.name,
    target: pair.target,
    oursP50: percentile(ours, 50),
    oursP95: percentile(ours, 95),
    oursP99: percentile(ours, 99),
    floorP50: percentile(floor, 50),
    floorP95: percentile(floor, 95),
    floorP99: percentile(floor, 99),
    mismatch,
  };
  progress(
    `  ${row.name}: ours ${row.oursP50.toFixed(1)}/${row.oursP99.toFixed(1)} ms, floor ${
      row.floorP50.toFixed(1)
    }/${row.floorP99.toFixed(1)} ms${mismatch ? ` MISMATCH ${mismatch}` : ""}`,
  );
  return row;
}

function diff(label: string, a: unknown, b: unknown): string | null {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  return x === y ? null : `${label}: ${x.slice(0, 200)} vs ${y.slice(0, 200)}`;
}

// --- the operations -------------------------------------------------------------------------

async function readPass(
  sql: Sql,
  brandId: string,
  scope: string,
  predictionSettings: PredictionSettings,
): Promise<Row[]> {
  const rows: Row[] = [];
  const brand = { brandId, scope };
  // A customer with several orders (k small = frequent buyer under the skew) and a profile.
  const email = "customer1001@a.example.com";
  const [contact] = await sql<{ id: string }[]>`
    select id from contacts where brand_id = ${brandId} and email = ${email}`;
  const contactId = contact!.id;
  const since = new Date(NOW.getTime() - 30 * 86_400_000);
  const page = { limit: 25, offset: 0 };
  const orderFloor = (where: postgres.PendingQuery<postgres.Row[]>) => async () => {
    const list = await sql<{ external_id: string }[]>`
      select id, external_id, number, state, billing_status, total::text, currency_code,
             contact_id, created_at, recovered_at
      from orders where ${where} order by created_at desc, id limit 25`;
    const [n] = await sql<{ n: number }[]>`
      select count(*)::int as n from (select 1 from orders where ${where} limit 10001) c`;
    return { ids: list.map((o) => o.external_id), total: n!.n };
  };
  const ordersSame = (
    a: { list: { external_id: string }[]; total: number },
    b: { ids: string[]; total: number },
  ) => diff("orders", [a.list.map((o) => o.external_id), a.total], [b.ids, b.total]);

  rows.push(
    await measure({
      name: "order list, first page, no filter",
      target: CUSTOMER_P99_MS,
      iterations: ITERATIONS,
      ours: () => listOrders(sql, brandId, {}, page),
      floor: orderFloor(sql`brand_id = ${brandId}`),
      same: ordersSame,
    }),
  );
  rows.push(
    await measure({
      name: "order list, state=complete, last 30 days",
      target: CUSTOMER_P99_MS,
      iterations: ITERATIONS,
      ours: () =>
        listOrders(
          sql,
          brandId,
          { state: "complete", createdAtGte: since, createdAtLte: NOW },
          page,
        ),
      floor: orderFloor(
        sql`brand_id = ${brandId} and state = 'complete' and created_at >= ${since}
            and created_at <= ${NOW}`,
      ),
      same: ordersSame,
    }),
  );
  rows.push(
    await measure({
      name: "order list, customer_email filter",
      target: CUSTOMER_P99_MS,
      iterations: ITERATIONS,
      ours: async () => {
        const id = await resolveCustomerFilter(sql, brandId, { email });
        return await listOrders(sql, brandId, { contactId: id }, page);
      },
      floor: async () => {
        const [c] = await sql<{ id: string }[]>`
          select id from contacts where brand_id = ${brandId} and email = ${email}`;
        return await orderFloor(sql`brand_id = ${brandId} and contact_id = ${c!.id}`)();
      },
      same: ordersSame,
    }),
  );
  // What the insights route pays for predictions: ours is the route's call (brand A has a ready
  // model), the floor the same function without predictions asked, i.e. the insights as they were
  // before predictions (summary row alone, top products alone). Ours reads the brand's model in
  // the summary statement and her order days in the top-products statement (same scan of her
  // orders), then runs the model's arithmetic: no statement more. A p95 needs more samples than
  // the other rows take.
  rows.push(
    await measure({
      name: "customer insights + predictions (email)",
      target: CUSTOMER_P99_MS,
      iterations: P95_ITERATIONS,
      ours: async () => {
        const resolved = await resolveCustomer(sql, brand, email);
        return await customerInsights(
          sql,
          brandId,
          resolved!.contactId,
          FRESH,
          predictionSettings,
        );
      },
      floor: async () => {
        const resolved = await resolveCustomer(sql, brand, email);
        return await customerInsights(sql, brandId, resolved!.contactId, FRESH);
      },
      // Everything but the predictions agrees (top products included), and ours has them.
      same: (a, b) => {
        const { predicted, churn, ...rest } = a;
        return diff("insights", [rest, { ...churn, probability: undefined }, predicted !== null], [
          { ...b, churn: undefined },
          b.churn,
          true,
        ]);
      },
    }),
  );
  rows.push(
    await measure({
      name: "customer record (email)",
      target: CUSTOMER_P99_MS,
      iterations: ITERATIONS,
      ours: async () => {
        const resolved = await resolveCustomer(sql, brand, email);
        // The service's budget: a permit of the brand's share (free here) and QUERY_TIMEOUT_MS.
        return await customerRecord(sql, brand, email, resolved!, NOW, {
          permit: () => () => {},
          timeoutMs: 5000,
        });
      },
      floor: async () => {
        const [p] = await sql`
          select item_id, properties from profiles
          where scope = ${scope} and lower(properties ->> 'email') = ${email} limit 1`;
        const [c] = await sql<{ id: string }[]>`
          select id from contacts where brand_id = ${brandId} and email = ${email}
          order by created_at limit 1`;
        const [commerce] = await sql<{ total: string; n: number }[]>`
          select sum(total)::text as total, count(*)::int as n,
                 round(sum(total) / nullif(count(*), 0), 2)::text as aov,
                 mode() within group (order by currency_code) as currency,
                 min(created_at) as first, max(created_at) as last
          from orders where contact_id = ${c!.id} and state = 'complete'`;
        await sql`select id, integration_id, is_enabled, status, connected_at
                  from integrations where brand_id = ${brandId}`;
        await sql`select count(*) filter (where status = 'active') as active, count(*),
                         min(next_billing_date) filter (where status = 'active')
                  from subscriptions where contact_id = ${c!.id}`;
        return { profile: p!.item_id, total: commerce!.total, n: commerce!.n };
      },
      same: (a, b) =>
        diff(
          "record",
          [a.profile?.id, a.commerce?.total_spend, a.commerce?.order_count],
          [b.profile, b.total, b.n],
        ),
    }),
  );
  rows.push(
    await measure({
      name: "customer insights (email)",
      target: CUSTOMER_P99_MS,
      iterations: ITERATIONS,
      ours: async () => {
        const resolved = await resolveCustomer(sql, brand, email);
        return await customerInsights(sql, brandId, resolved!.contactId, FRESH);
      },
      floor: async () => {
        // A DBA's version on the orders: the customer's figures and brand-relative scores.
        const [row] = await sql<{ ltv: string; n: number; r: number; f: number; m: number }[]>`
          with c as (
            select contact_id, count(*) as n, sum(total) as spend, max(created_at) as last
            from orders where brand_id = ${brandId} and state = 'complete'
              and contact_id is not null
            group by contact_id
          ), s as (
            select contact_id, n, spend,
                   ceil(cume_dist() over (order by last) * 5)::int as r,
                   ceil(cume_dist() over (order by n) * 5)::int as f,
                   ceil(cume_dist() over (order by spend) * 5)::int as m
            from c
          )
          select spend::text as ltv, n::int as n, r, f, m from s where contact_id = ${contactId}`;
        return row!;
      },
      same: (a, b) =>
        diff(
          "insights",
          [
            a.ltv,
            a.order_count,
            a.rfm?.recency_score,
            a.rfm?.frequency_score,
            a.rfm?.monetary_score,
          ],
          [b.ltv, b.n, b.r, b.f, b.m],
        ),
    }),
  );
  rows.push(
    await measure({
      name: "brand LTV",
      target: BRAND_P99_MS,
      iterations: BRAND_ITERATIONS,
      ours: () => brandLtv(sql, brandId, FRESH),
      floor: async () => {
        const [row] = await sql<{ total: string; n: number; avg: string }[]>`
          select sum(spend)::text as total, count(*)::int as n, round(avg(spend), 2)::text as avg
          from (select sum(total) as spend from orders
                where brand_id = ${brandId} and state = 'complete' and contact_id is not null
                group by contact_id) c`;
        return row!;
      },
      same: (a, b) =>
        diff(
          "ltv",
          [a.total_revenue, a.customer_count, a.average_ltv],
          [b.total, b.n, b.avg],
        ),
    }),
  );
  rows.push(
    await measure({
      name: "brand RFM",
      target: BRAND_P99_MS,
      iterations: BRAND_ITERATIONS,
      ours: () => brandRfm(sql, brandId, FRESH),
      floor: async () => {
        const scores = await sql<{ r: number; n: number }[]>`
          select r, count(*)::int as n from (
            select ceil(cume_dist() over (order by last) * 5)::int as r,
                   ceil(cume_dist() over (order by n) * 5)::int as f,
                   ceil(cume_dist() over (order by spend) * 5)::int as m
            from (select count(*) as n, sum(total) as spend, max(created_at) as last
                  from orders
                  where brand_id = ${brandId} and state = 'complete' and contact_id is not null
                  group by contact_id) c
          ) s group by r order by r`;
        return scores;
      },
      same: (a, b) => diff("rfm recency", Object.values(a.scores.recency), b.map((s) => s.n)),
    }),
  );
  rows.push(
    await measure({
      name: "brand top products (10)",
      target: BRAND_P99_MS,
      iterations: BRAND_ITERATIONS,
      ours: () => brandProducts(sql, brandId, 10, FRESH),
      floor: async () =>
        await sql<{ product_id: string; revenue: string }[]>`
          select li.product_id, sum(li.price * li.quantity)::text as revenue,
                 count(distinct o.contact_id) as customers
          from orders o
          cross join lateral jsonb_to_recordset(o.line_items)
            as li(product_id text, price numeric, quantity integer)
          where o.brand_id = ${brandId} and o.state = 'complete' and li.product_id is not null
          group by li.product_id order by sum(li.price * li.quantity) desc, li.product_id
          limit 10`,
      same: (a, b) =>
        diff(
          "products",
          a.map((p) => [p.product_id, p.revenue]),
          b.map((p) => [p.product_id, p.revenue]),
        ),
    }),
  );
  rows.push(
    await measure({
      name: "brand at-risk, first page",
      target: BRAND_P99_MS,
      iterations: BRAND_ITERATIONS,
      ours: () => atRiskCustomers(sql, brandId, page, FRESH),
      floor: async () => {
        const list = await sql<{ contact_id: string }[]>`
          with o as (
            select contact_id, total, created_at,
                   extract(epoch from created_at - lag(created_at) over (
                     partition by contact_id order by created_at)) / 86400 as gap
            from orders
            where brand_id = ${brandId} and state = 'complete' and contact_id is not null
          ), b as (select percentile_cont(0.5) within group (order by gap) as median from o),
          c as (
            select contact_id, sum(total) as spend, max(created_at) as last,
                   percentile_cont(0.5) within group (order by gap) as median
            from o group by contact_id
          )
          select c.contact_id from c, b
          where coalesce(c.median, b.median) > 0
            and extract(epoch from ${NOW}::timestamptz - c.last) / 86400
                >= 2 * coalesce(c.median, b.median)
          order by c.spend desc, c.contact_id limit 25`;
        return list.map((r) => r.contact_id);
      },
      same: (a, b) => diff("at-risk", a.list.map((r) => r.contact_id), b),
    }),
  );
  return rows;
}

// --- import ---------------------------------------------------------------------------------

async function writeImportFile(path: string, orders: number): Promise<void> {
  const file = await Deno.open(path, { write: true, create: true, truncate: true });
  const writer = file.writable.getWriter();
  const encoder = new TextEncoder();
  let chunk: string[] = [];
  for (let g = 1; g <= orders; g++) {
    const k = 1 + (g * 7919) % 20_000;
    const items = [];
    for (let p = 0; p <= g % 3; p++) {
      const pr = 1 + (g * 31 + p * 17) % 500;
      items.push({
        title: `Product ${pr}`,
        quantity: 1 + (g + p) % 3,
        price: `${3 + pr % 97}.00`,
        sku: `SKU-${pr}`,
        product_id: String(9_000_000 + pr),
        variant_id: String(8_000_000 + pr * 3),
        variant_title: "Default",
      });
    }
    const created = new Date(NOW.getTime() - (g % 700) * 86_400_000).toISOString();
    chunk.push(JSON.stringify({
      external_id: String(4_000_000_000 + g),
      number: `#${g}`,
      state: g % 5 === 0 ? "pending" : "complete",
      billing_status: g % 5 === 0 ? "billable" : "complete",
      total: `${5 + g % 290}.${String(g % 100).padStart(2, "0")}`,
      currency_code: "USD",
      created_at: created,
      processed_at: created,
      updated_at: created,
      recovered_at: null,
      customer: {
        shopify_customer_id: String(3_000_000_000 + k),
        email: `Import${k}@Example.com`,
        phone: `+1 613 55${String(k).padStart(5, "0")}`,
        first_name: `First${k}`,
        last_name: `Last${k}`,
      },
      line_items: items,
    }));
    if (chunk.length === 5000) {
      await writer.write(encoder.encode(chunk.join("\n") + "\n"));
      chunk = [];
    }
  }
  if (chunk.length) await writer.write(encoder.encode(chunk.join("\n") + "\n"));
  await writer.close();
}

async function importOurs(sql: Sql, brandId: string, path: string) {
  const newId = monotonicFactory();
  const now = new Date();
  const file = await Deno.open(path);
  const t0 = performance.now();
  const result = await importNdjson(
    sql,
    file.readable,
    orderImport({ brandId, newId, now, copy: true }),
  );
  return { ms: performance.now() - t0, imported: result.imported, rejected: result.rejected };
}

interface _FloorLine {
  external_id: string;
  number: string;
  state: string;
  billing_status: string;
  total: string;
  currency_code: string;
  created_at: string;
  processed_at: string | null;
  updated_at: string | null;
  customer: { shopify_customer_id: string; email: string };
  line_items: {
    title: string;
    quantity: number;
    price: string;
    sku: string;
    product_id: string;
    variant_id: string;
    variant_title: string;
  }[];
}

/** The floor: JSON.parse each line, plain multi-row INSERTs of contacts and orders (with items). */
async function importFloor(sql: Sql, brandId: string, path: string) {
  const file = await Deno.open(path);
  const t0 = performance.now();
  const decoder = new TextDecoderStream();
  let pending = "";
  let batch: _FloorLine[] = [];
  const contacts = new Map<string, string>();
  let imported = 0;
  const flush = async (lines: _FloorLine[]) => {
    if (lines.length === 0) return;
    const newContacts: { id: string; sid: string; email: string }[] = [];
    for (const line of lines) {
      const sid = line.customer.shopify_customer_id;
      if (!contacts.has(sid)) {
        const id = crypto.randomUUID();
        contacts.set(sid, id);
        newContacts.push({ id, sid, email: line.customer.email.toLowerCase() });
      }
    }
    await sql.begin(async (tx) => {
      if (newContacts.length) {
        await tx`insert into contacts (id, brand_id, shopify_customer_id, email, created_at,
                                       updated_at)
                 select unnest(${newContacts.map((c) => c.id)}::text[]), ${brandId},
                        unnest(${newContacts.map((c) => c.sid)}::text[]),
                        unnest(${newContacts.map((c) => c.email)}::text[]), now(), now()`;
      }
      const ids = lines.map((l) => `ordf_${l.external_id}`);
      await tx`insert into orders (id, brand_id, external_id, number, state, billing_status,
                                   total, currency_code, contact_id, created_at, processed_at,
                                   updated_at, synced_at, line_items)
               select unnest(${ids}::text[]), ${brandId},
                      unnest(${lines.map((l) => l.external_id)}::text[]),
                      unnest(${lines.map((l) => l.number)}::text[]),
                      unnest(${lines.map((l) => l.state)}::text[]),
                      unnest(${lines.map((l) => l.billing_status)}::text[]),
                      unnest(${lines.map((l) => l.total)}::numeric[]),
                      unnest(${lines.map((l) => l.currency_code)}::text[]),
                      unnest(${
        lines.map((l) => contacts.get(l.customer.shopify_customer_id)!)
      }::text[]),
                      unnest(${lines.map((l) => l.created_at)}::timestamptz[]),
                      unnest(${lines.map((l) => l.processed_at)}::timestamptz[]),
                      unnest(${lines.map((l) => l.updated_at)}::timestamptz[]), now(),
                      unnest(${lines.map((l) => JSON.stringify(l.line_items))}::jsonb[])`;
    });
    imported += lines.length;
  };
  for await (const chunk of file.readable.pipeThrough(decoder)) {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const text = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (text) batch.push(JSON.parse(text));
      if (batch.length >= 2000) {
        await flush(batch);
        batch = [];
      }
    }
  }
  await flush(batch);
  return { ms: performance.now() - t0, imported };
}

// --- main -----------------------------------------------------------------------------------

async function main(): Promise<number> {
  const host = new URL(PG_URL).hostname;
  if (!["127.0.0.1", "localhost"].includes(host)) throw new Error("loopback only");
  const admin = postgres(PG_URL, { onnotice: () => {}, max: 1 });
  const name = `bench_commerce_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin`create database ${admin(name)}`;
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  // The driver as the service and `deno task admin` open it (lib/store/db.ts).
  const sql = connectPostgres(url.toString(), 4);
  const tmp = await Deno.makeTempDir({ prefix: "commerce_load" });
  let invalid = false;
  try {
    await migrate(sql);
    const brands = { a: "brand_a", b: "brand_b", i: "brand_import", f: "brand_floor" };
    for (const [key, id] of Object.entries(brands)) {
      await sql`insert into brands (id, name) values (${id}, ${key})`;
    }
    await sql`
      insert into integrations (id, integration_id, brand_id, shop_domain, status, connected_at)
      values ('int_a', gen_random_uuid(), 'brand_a', 'a-commerce.myshopify.com', 'connected', now()),
             ('int_b', gen_random_uuid(), 'brand_b', 'b-commerce.myshopify.com', 'connected', now())`;
    progress(`generating (${name})`);
    const g0 = performance.now();
    await generateCommerce(sql, brands, {
      now: NOW,
      a: { customers: CUSTOMERS_A, orders: ORDERS_A },
      b: { customers: CUSTOMERS_B, orders: ORDERS_B },
      progress,
    });
    progress(`generated in ${((performance.now() - g0) / 1000).toFixed(1)} s`);

    // The refresh: what one read pays at most once per staleness window after writes.
    const refreshMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      await markInsightsChanged(sql, brands.a);
      await refreshSummaries(sql, brands.a, NOW);
      refreshMs.push(performance.now() - t0);
      progress(`  refresh of brand A: ${refreshMs.at(-1)!.toFixed(0)} ms`);
    }
    await refreshSummaries(sql, brands.b, NOW);
    await sql.unsafe("analyze customer_summaries, product_summaries").simple();

    // The predictions refit of brand A: its completed orders read, then fitted in a worker.
    const kv = await Deno.openKv(":memory:");
    const settings = { minCustomers: 500, minHistoryDays: 180, clvDiscountRate: 0 };
    const fitMs: number[] = [];
    let fitted: Awaited<ReturnType<typeof fitBrandPredictions>> | null = null;
    for (let i = 0; i < 2; i++) {
      fitted = await fitBrandPredictions({ sql, kv, now: () => NOW, settings }, brands.a);
      fitMs.push(fitted.fit_ms);
      progress(`  predictions fit of brand A: ${fitted.fit_ms} ms (${fitted.status})`);
    }
    invalid ||= fitted?.status !== "ready";

    const rows = await readPass(sql, brands.a, "a-commerce.myshopify.com", settings);
    kv.close();
    invalid ||= rows.some((r) => r.mismatch);

    progress(`writing the import file (${IMPORT_ORDERS} orders)`);
    const path = `${tmp}/orders.ndjson`;
    await writeImportFile(path, IMPORT_ORDERS);
    progress("import: ours, first");
    const first = await importOurs(sql, brands.i, path);
    progress(`  ${first.imported} in ${first.ms.toFixed(0)} ms, ${first.rejected.length} rejected`);
    progress("import: ours, re-import");
    const again = await importOurs(sql, brands.i, path);
    progress(`  ${again.imported} in ${again.ms.toFixed(0)} ms`);
    progress("import: floor");
    const floor = await importFloor(sql, brands.f, path);
    progress(`  ${floor.imported} in ${floor.ms.toFixed(0)} ms`);
    invalid ||= first.imported !== IMPORT_ORDERS || again.imported !== IMPORT_ORDERS;

    const f = (ms: number) => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));
    // The issue's target is a fit of 100,000 customers in 10 s; a larger brand scales it.
    const fitTargetMs = 10_000 * Math.max(1, (fitted?.customers ?? 0) / 100_000);
    const out: string[] = [];
    out.push(
      `PostgreSQL; brand A ${ORDERS_A.toLocaleString("en-US")} orders / ${
        CUSTOMERS_A.toLocaleString("en-US")
      } customers, brand B ${ORDERS_B.toLocaleString("en-US")} / ${
        CUSTOMERS_B.toLocaleString("en-US")
      }; reads ${ITERATIONS} iterations (customer insights with / without predictions ${P95_ITERATIONS}), brand insights ${BRAND_ITERATIONS}`,
      "",
      "| Operation | ours p50 / p99 | floor p50 / p99 | target | verdict |",
      "| --- | --- | --- | --- | --- |",
    );
    for (const r of rows) {
      const verdict = r.mismatch ? "MISMATCH" : r.oursP99 < r.target! ? "PASS" : "FAIL";
      out.push(
        `| ${r.name} | ${f(r.oursP50)} / ${f(r.oursP99)} ms | ${f(r.floorP50)} / ${
          f(r.floorP99)
        } ms | p99 < ${r.target} ms | ${verdict} |`,
      );
    }
    out.push(
      `| refresh of brand A's summaries (3 runs) | ${f(percentile(refreshMs, 50))} / ${
        f(Math.max(...refreshMs))
      } ms | — | info | — |`,
      ..._predictionsP95Rows(rows),
      `| predictions fit of brand A (${
        fitted?.customers.toLocaleString("en-US")
      } customers; orders read + fit; 2 runs) | ${f(Math.min(...fitMs))} / ${
        f(Math.max(...fitMs))
      } ms | — | < ${f(fitTargetMs)} ms (10 s per 100,000 customers) | ${
        Math.max(...fitMs) < fitTargetMs ? "PASS" : "FAIL"
      } |`,
      "",
      "| Import (100,000-order NDJSON file) | ms | orders/s | target | verdict |",
      "| --- | --- | --- | --- | --- |",
    );
    for (
      const [label, r, target] of [
        ["ours, first import", first, true],
        ["ours, re-import", again, true],
        ["floor: JSON.parse + plain multi-row INSERT", floor, false],
      ] as const
    ) {
      const rate = (r.imported / r.ms) * 1000;
      out.push(
        `| ${label} | ${r.ms.toFixed(0)} | ${Math.round(rate).toLocaleString("en-US")} | ${
          target ? `≥ ${IMPORT_ROWS_PER_S.toLocaleString("en-US")}/s` : "—"
        } | ${target ? (rate >= IMPORT_ROWS_PER_S ? "PASS" : "FAIL") : "—"} |`,
      );
    }
    console.log(out.join("\n"));
  } catch (err) {
    console.error(err);
    invalid = true;
  } finally {
    await sql.end({ timeout: 5 });
    if (!KEEP) await admin`drop database if exists ${admin(name)} with (force)`;
    else progress(`kept ${name}`);
    await admin.end({ timeout: 5 });
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
  return invalid ? 1 : 0;
}

Deno.exit(await main());

// The issue's target for the insights route: its p95 with the predictions within 10% of without.
function _predictionsP95Rows(rows: Row[]): string[] {
  const row = rows.find((r) => r.name.startsWith("customer insights + predictions"));
  if (!row) return [];
  const ratio = row.oursP95 / row.floorP95;
  return [
    `| customer insights p95, with / without predictions | ${row.oursP95.toFixed(2)} / ${
      row.floorP95.toFixed(2)
    } ms (x${ratio.toFixed(2)}) | — | within 10% | ${ratio <= 1.1 ? "PASS" : "FAIL"} |`,
  ];
}
