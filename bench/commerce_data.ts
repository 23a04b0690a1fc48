/**
 * The commerce data the load benchmarks share (bench/commerce_load.ts, bench/dashboard_load.ts):
 * two brands of contacts, orders, subscriptions and profiles generated set-based in SQL.
 *
 * @module
 */
import type { Sql } from "../lib/store/db.ts";

/** One brand's contacts, orders, line items, subscriptions and profiles, set-based. */
async function _generateBrand(
  sql: Sql,
  input: { id: string; scope: string; tag: string; customers: number; orders: number; now: Date },
): Promise<void> {
  const { id, scope, tag, customers, orders } = input;
  const now = input.now.toISOString();
  await sql.begin(async (t) => {
    const tx = t as unknown as Sql;
    await tx`select set_config('synchronous_commit', 'off', true)`;
    await tx`select setseed(${tag === "a" ? 0.25 : 0.75})`;
    await tx`
      insert into contacts (id, brand_id, shopify_customer_id, email, phone, first_name,
                            last_name, created_at, updated_at)
      select md5(${tag}::text || k)::uuid::text, ${id}, (${tag === "a" ? 7 : 8}::bigint
               * 1000000000 + k)::text,
             'customer' || k || '@' || ${tag}::text || '.example.com',
             '+1613' || lpad(k::text, 7, '0'), 'First' || k, 'Last' || k,
             ${now}::timestamptz - interval '800 days', ${now}::timestamptz
      from generate_series(1, ${customers}::int) k`;
    // Orders: 90% attributed, customers skewed (some buy often); 80% complete.
    await tx`
      insert into orders (id, brand_id, external_id, number, state, billing_status, total,
                          currency_code, contact_id, created_at, processed_at, updated_at,
                          synced_at, line_items)
      select 'ord_' || ${tag}::text || '_' || g, ${id}, (${tag === "a" ? 5 : 6}::bigint
               * 1000000000 + g)::text, '#' || g,
             s.state, case s.state when 'complete' then 'complete' when 'pending' then 'billable'
               when 'cancelled' then 'on_hold' when 'delivered' then 'complete'
               else 'billable' end,
             round((5 + random() * 295)::numeric, 2),
             case when random() < 0.95 then 'USD' else 'CAD' end,
             case when random() < 0.9
               then md5(${tag}::text || (1 + floor(power(random(), 2) * ${customers}::int))::int)
                 ::uuid::text end,
             s.created, s.created, s.created, ${now}::timestamptz,
             -- 1-3 line items, products skewed (a few sell often).
             (select jsonb_agg(jsonb_build_object(
                       'title', 'Product ' || pr, 'quantity', 1 + (s.g + p) % 3,
                       'price', round((3 + pr % 97)::numeric, 2)::text, 'sku', 'SKU-' || pr,
                       'product_id', (9000000 + pr)::text, 'variant_id', (8000000 + pr * 3)::text,
                       'variant_title', 'Default') order by p)
              from (select p, (1 + floor(power(random(), 3) * 500))::int as pr
                    from generate_series(0, s.g % 3) p) i)
      from (
        select g, ${now}::timestamptz - random() * interval '730 days' as created,
               case when r < 0.8 then 'complete' when r < 0.85 then 'pending'
                    when r < 0.9 then 'cancelled' when r < 0.95 then 'delivered'
                    else 'draft' end as state
        from (select g, random() as r from generate_series(1, ${orders}::int) g) x
      ) s`;
    await tx`
      insert into subscriptions (id, brand_id, external_id, status, next_billing_date,
                                 contact_id, created_at, updated_at)
      select 'sub_' || ${tag}::text || '_' || k, ${id}, 'sc' || k,
             case when k % 3 = 0 then 'active' else 'cancelled' end,
             ${now}::timestamptz + (k % 30) * interval '1 day',
             md5(${tag}::text || k)::uuid::text, ${now}::timestamptz, ${now}::timestamptz
      from generate_series(1, ${customers}::int, 10) k`;
    // Half the customers have a profile (the storefront's identity fields).
    await tx`
      insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                            nb_of_visits, created_at, updated_at)
      select ${scope}, 'store_' || md5(${tag}::text || 'p' || k),
             jsonb_build_object('shopDomain', ${scope}::text,
               'email', 'customer' || k || '@' || ${tag}::text || '.example.com',
               'shopifyCustomerId', (${tag === "a" ? 7 : 8}::bigint * 1000000000 + k)::text,
               'firstName', 'First' || k),
             'server', ${now}::timestamptz - interval '300 days', ${now}::timestamptz,
             1 + k % 20, ${now}::timestamptz - interval '300 days', ${now}::timestamptz
      from generate_series(1, ${customers}::int, 2) k`;
  });
}

/** Sizes of one generated brand. */
export interface BrandSize {
  customers: number;
  orders: number;
}

/**
 * Generates brands A (scope `a-commerce.myshopify.com`) and B (`b-commerce.myshopify.com`):
 * contacts, orders with line items, subscriptions and profiles, set-based, with the secondary
 * indexes dropped during the load and rebuilt, then VACUUM ANALYZE. Deterministic per brand.
 */
export async function generateCommerce(
  sql: Sql,
  brands: { a: string; b: string },
  options: { now: Date; a: BrandSize; b: BrandSize; progress: (message: string) => void },
): Promise<void> {
  const { progress, now } = options;
  const indexes = await sql<{ indexname: string; indexdef: string }[]>`
    select i.indexname, i.indexdef from pg_indexes i
    where i.schemaname = current_schema()
      and i.tablename in ('contacts', 'orders', 'subscriptions', 'profiles')
      and not exists (select 1 from pg_constraint c where c.conname = i.indexname)`;
  for (const index of indexes) await sql`drop index ${sql(index.indexname)}`;
  progress(`  brand A: ${options.a.customers} customers, ${options.a.orders} orders`);
  await _generateBrand(sql, {
    id: brands.a,
    scope: "a-commerce.myshopify.com",
    tag: "a",
    ...options.a,
    now,
  });
  progress(`  brand B: ${options.b.customers} customers, ${options.b.orders} orders`);
  await _generateBrand(sql, {
    id: brands.b,
    scope: "b-commerce.myshopify.com",
    tag: "b",
    ...options.b,
    now,
  });
  progress(`  rebuilding ${indexes.length} secondary indexes`);
  await sql.begin(async (tx) => {
    await tx`set local maintenance_work_mem = '256MB'`;
    for (const index of indexes) await tx.unsafe(index.indexdef);
  });
  progress("  vacuum analyze");
  await sql.unsafe("vacuum analyze").simple();
}
