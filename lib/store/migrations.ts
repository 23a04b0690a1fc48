/**
 * The Postgres schema as an ordered list of migrations, and applying them (docs/operations.md).
 *
 * @module
 */
import type { Sql } from "./db.ts";

/** One schema change. Versions only grow; an applied migration is never edited. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Every migration, in order. Later issues append to this list. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "tenancy",
    sql: `
      create table brands (
        id text primary key,
        name text not null check (length(name) between 1 and 200),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );

      -- One storefront integration per brand; its shop domain is the brand's scope, and a shop
      -- belongs to one brand only.
      create table integrations (
        id text primary key,
        integration_id uuid not null unique,
        brand_id text not null references brands (id) on delete cascade,
        provider text not null default 'shopify',
        shop_domain text not null unique,
        is_enabled boolean not null default true,
        status text not null check (status in ('connected', 'disconnected')),
        connected_at timestamptz,
        access_token_ciphertext text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        unique (brand_id, provider)
      );

      create table brand_permissions (
        brand_id text not null references brands (id) on delete cascade,
        permission text not null,
        granted_at timestamptz not null default now(),
        primary key (brand_id, permission)
      );
    `,
  },
  {
    version: 2,
    name: "engine_write_side",
    sql: `
      -- Profiles of one scope. A merged-away profile leaves its row and is reached through
      -- profile_aliases instead.
      create table profiles (
        scope text not null,
        item_id text not null,
        properties jsonb not null default '{}'::jsonb,
        provenance text not null check (provenance in ('server', 'pixel', 'merged')),
        first_visit timestamptz,
        last_visit timestamptz,
        nb_of_visits integer not null default 0,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        primary key (scope, item_id)
      );
      create index profiles_merge_identifier_idx
        on profiles (scope, (properties ->> 'mergeIdentifier'))
        where properties ? 'mergeIdentifier';

      -- Every id a merged profile absorbed, so that each stays readable.
      create table profile_aliases (
        scope text not null,
        alias_id text not null,
        profile_id text not null,
        merged_at timestamptz not null,
        primary key (scope, alias_id)
      );
      create index profile_aliases_profile_idx on profile_aliases (scope, profile_id);

      create table sessions (
        scope text not null,
        item_id text not null,
        profile_id text not null,
        first_event_at timestamptz not null,
        last_event_at timestamptz not null,
        event_count integer not null,
        primary key (scope, item_id)
      );
      create index sessions_profile_idx on sessions (scope, profile_id, first_event_at);

      -- Events keep the profile id they were sent with; reads resolve it through the aliases.
      create table events (
        scope text not null,
        id text not null,
        profile_id text not null,
        session_id text not null,
        event_type text not null,
        time_stamp timestamptz not null,
        properties jsonb not null default '{}'::jsonb,
        flattened_properties jsonb not null default '{}'::jsonb,
        target jsonb,
        source text not null check (source in ('server', 'pixel')),
        received_at timestamptz not null,
        primary key (scope, id)
      );
      create index events_profile_idx on events (scope, profile_id, time_stamp, id);
      create index events_type_idx on events (scope, event_type, time_stamp);
    `,
  },
  {
    version: 3,
    name: "storefront_origins",
    sql: `
      -- Browser origins, besides https://<shop_domain>, allowed to send pixel events for a shop
      -- (its custom storefront domains).
      alter table integrations add column storefront_origins text[] not null default '{}';
    `,
  },
  {
    version: 4,
    name: "condition_helpers",
    sql: `
      -- Helpers of the condition compiler (lib/engine/conditions.ts). All immutable: they depend
      -- on their arguments only, never on the session's TimeZone or DateStyle.
      --
      -- cdp_try_timestamptz: an ISO 8601 date-time (date, optional time with minutes, seconds
      -- and a fraction, optional offset; none means UTC) as timestamptz; null for anything else,
      -- impossible dates included, without raising.
      create function cdp_try_timestamptz(value text) returns timestamptz
      language plpgsql immutable strict parallel safe as $fn$
      declare
        m text[];
        y integer;
        mo integer;
        d integer;
        h integer;
        mi integer;
        s integer;
        micros integer;
        ts timestamp;
      begin
        if length(value) > 40 then
          return null;
        end if;
        m := regexp_match(value, '^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.]([0-9]{1,9}))?)?([Zz]|([+-])([0-9]{2})(?::?([0-9]{2}))?)?)?$');
        if m is null then
          return null;
        end if;
        y := m[1]::integer;
        mo := m[2]::integer;
        d := m[3]::integer;
        h := coalesce(m[4]::integer, 0);
        mi := coalesce(m[5]::integer, 0);
        s := coalesce(m[6]::integer, 0);
        micros := coalesce(rpad(left(m[7], 6), 6, '0')::integer, 0);
        if y < 1 or mo < 1 or mo > 12 or d < 1 or h > 23 or mi > 59 or s > 59
           or d > extract(day from make_date(y, mo, 1) + interval '1 month - 1 day') then
          return null;
        end if;
        ts := make_timestamp(y, mo, d, h, mi, 0) + (s * 1000000 + micros) * interval '1 microsecond';
        if m[9] is not null then
          if m[10]::integer > 23 or coalesce(m[11]::integer, 0) > 59 then
            return null;
          end if;
          ts := ts - (case m[9] when '-' then -1 else 1 end)
            * (m[10]::integer * interval '1 hour' + coalesce(m[11]::integer, 0) * interval '1 minute');
        end if;
        return ts at time zone 'UTC';
      end
      $fn$;

      -- cdp_elements: the scalar values of a jsonb value (string, number, boolean): the elements
      -- of an array, else the value itself; nothing for SQL NULL, JSON null, objects.
      create function cdp_elements(value jsonb) returns setof jsonb
      language sql immutable parallel safe as $fn$
        select x from jsonb_array_elements(
          case jsonb_typeof(value) when 'array' then value else jsonb_build_array(value) end
        ) as t(x)
        where jsonb_typeof(x) in ('string', 'number', 'boolean')
      $fn$;

      -- cdp_jsonb_numeric: a JSON number as numeric, null for anything else (never a cast error).
      create function cdp_jsonb_numeric(value jsonb) returns numeric
      language sql immutable parallel safe as $fn$
        select case when jsonb_typeof(value) = 'number' then value::numeric end
      $fn$;

      -- cdp_jsonb_exists: Elasticsearch's exists: present, not JSON null, and an array only with
      -- a non-null element.
      create function cdp_jsonb_exists(value jsonb) returns boolean
      language sql immutable parallel safe as $fn$
        select case jsonb_typeof(value)
          when 'array' then exists (
            select 1 from jsonb_array_elements(value) as t(x) where jsonb_typeof(x) <> 'null')
          when 'null' then false
          else value is not null
        end
      $fn$;
    `,
  },
  {
    version: 5,
    name: "segments",
    sql: `
      -- json, not jsonb: a stored condition must round-trip exactly (key order included).
      create table segments (
        scope text not null,
        id text not null,
        name text not null,
        description text,
        condition json not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        primary key (scope, id)
      );
      -- GET /cdp/profiles lists one bucket in id order (keyset); profile events page by id.
      create index profiles_bucket_idx on profiles (scope, provenance, item_id);
      create index events_profile_id_idx on events (scope, profile_id, id);
    `,
  },
  {
    version: 6,
    name: "commerce",
    sql: `
      -- Storefront customers, as synced (imports, webhooks). Matched by Shopify id, then
      -- normalized email, then E.164 phone.
      create table contacts (
        id text primary key,
        brand_id text not null references brands (id) on delete cascade,
        shopify_customer_id text,
        email text,
        phone text,
        first_name text,
        last_name text,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create unique index contacts_shopify_idx on contacts (brand_id, shopify_customer_id)
        where shopify_customer_id is not null;
      create index contacts_email_idx on contacts (brand_id, email) where email is not null;
      create index contacts_phone_idx on contacts (brand_id, phone) where phone is not null;

      -- Money is numeric(20, 2): exact, rendered as 2-decimal strings.
      create table orders (
        id text primary key,
        brand_id text not null references brands (id) on delete cascade,
        external_id text not null,
        number text not null,
        state text not null
          check (state in ('pending', 'draft', 'complete', 'delivered', 'cancelled')),
        billing_status text not null
          check (billing_status in ('billable', 'processing', 'complete', 'on_hold')),
        total numeric(20, 2) not null,
        currency_code text not null,
        contact_id text references contacts (id) on delete set null,
        created_at timestamptz not null,
        processed_at timestamptz,
        updated_at timestamptz,
        recovered_at timestamptz,
        synced_at timestamptz not null,
        unique (brand_id, external_id)
      );
      create index orders_brand_created_idx on orders (brand_id, created_at desc, id);
      create index orders_contact_idx on orders (contact_id, created_at desc);

      create table order_line_items (
        order_id text not null references orders (id) on delete cascade,
        position integer not null,
        title text not null,
        quantity integer not null,
        price numeric(20, 2) not null,
        sku text,
        product_id text,
        variant_id text,
        variant_title text,
        primary key (order_id, position)
      );

      create table subscriptions (
        id text primary key,
        brand_id text not null references brands (id) on delete cascade,
        external_id text not null,
        status text not null check (status in ('active', 'paused', 'cancelled', 'expired', 'failed')),
        next_billing_date timestamptz,
        contact_id text references contacts (id) on delete set null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        unique (brand_id, external_id)
      );
      create index subscriptions_contact_idx on subscriptions (contact_id);
    `,
  },
  {
    version: 7,
    name: "shopify_webhooks",
    sql: `
      -- Shopify webhook deliveries already applied (lib/shopify/webhooks.ts): written in the
      -- transaction of the delivery's effect, so a repeated X-Shopify-Webhook-Id is acknowledged
      -- and never applied twice, and a failed delivery leaves no row and is applied on retry.
      create table webhook_deliveries (
        shop_domain text not null,
        webhook_id text not null,
        topic text not null,
        received_at timestamptz not null,
        primary key (shop_domain, webhook_id)
      );
      create index webhook_deliveries_received_idx on webhook_deliveries (received_at);

      -- Stale-delivery guards: the source's updated_at of the last customers/* webhook applied to
      -- a contact, and the revision_id of the last subscription_contracts/* webhook applied to a
      -- contract. (Orders compare their own updated_at, which is the source's.)
      alter table contacts add column source_updated_at timestamptz;
      alter table subscriptions add column source_revision numeric;

      -- Set when customers/redact detached the order from its customer; later deliveries of the
      -- order never attach a customer again.
      alter table orders add column customer_redacted_at timestamptz;
    `,
  },
  {
    version: 8,
    name: "condition_arrays",
    sql: `
      -- The scalar elements of a jsonb array as a typed array, for the condition compiler's array
      -- branch (value op ANY(...), range @> ANY(...), &&, @>). A function call rather than a
      -- correlated subquery keeps the whole scan parallel safe; the body's subquery keeps it
      -- from being inlined. Called only on arrays.
      create function cdp_texts(value jsonb) returns text[]
      language sql immutable strict parallel safe as $fn$
        select array(select x #>> '{}' from jsonb_array_elements(value) as t(x)
                     where jsonb_typeof(x) in ('string', 'number', 'boolean'))
      $fn$;
      create function cdp_numbers(value jsonb) returns numeric[]
      language sql immutable strict parallel safe as $fn$
        select array(select x::numeric from jsonb_array_elements(value) as t(x)
                     where jsonb_typeof(x) = 'number')
      $fn$;
      create function cdp_timestamps(value jsonb) returns timestamptz[]
      language sql immutable strict parallel safe as $fn$
        select array(select v from jsonb_array_elements(value) as t(x),
                       cdp_try_timestamptz(x #>> '{}') as v
                     where jsonb_typeof(x) in ('string', 'number', 'boolean') and v is not null)
      $fn$;
    `,
  },
  {
    version: 9,
    name: "commerce_summaries",
    sql: `
      -- Insights read materialized summaries (lib/commerce/summaries.ts). Every write to a
      -- brand's orders bumps its generation in the writing transaction; a refresh records the
      -- generation its snapshot saw, so a snapshot is known current or outdated exactly.
      create table insight_generations (
        brand_id text primary key references brands (id) on delete cascade,
        generation bigint not null
      );
      create table insight_snapshots (
        brand_id text primary key references brands (id) on delete cascade,
        generation bigint not null,
        refreshed_at timestamptz not null,
        refresh_ms integer not null,
        brand_median_gap float8,
        currency_code text
      );
      -- One row per customer (contact with a completed order) as of the snapshot, with its
      -- brand-relative RFM scores. Ids compare byte-wise (collate "C"): a refresh rewrites every
      -- row of a brand, and the default collation made that indexing several times slower.
      create table customer_summaries (
        brand_id text not null references brands (id) on delete cascade,
        contact_id text collate "C" not null,
        order_count integer not null,
        spend numeric(20, 2) not null,
        first_order_at timestamptz not null,
        last_order_at timestamptz not null,
        median_gap float8,
        currency_code text,
        r smallint not null,
        f smallint not null,
        m smallint not null,
        primary key (brand_id, contact_id)
      );
      create index customer_summaries_spend_idx
        on customer_summaries (brand_id, spend desc, contact_id);
      create table product_summaries (
        brand_id text not null references brands (id) on delete cascade,
        product_id text collate "C" not null,
        title text not null,
        quantity bigint not null,
        order_count integer not null,
        revenue numeric not null,
        customer_count integer not null,
        repeat_purchase_rate float8 not null,
        primary key (brand_id, product_id)
      );
      create index product_summaries_revenue_idx
        on product_summaries (brand_id, revenue desc, product_id);

      -- GET /cdp/commerce/orders?state=... pages and counts one state in date order.
      create index orders_brand_state_created_idx on orders (brand_id, state, created_at desc, id);

      -- The customer lookup finds profiles by identity field (lib/commerce/customers.ts).
      create index profiles_email_lower_idx on profiles (scope, lower(properties ->> 'email'));
      create index profiles_phone_lower_idx
        on profiles (scope, lower(properties ->> 'phoneNumber'));
      create index profiles_shopify_id_lower_idx
        on profiles (scope, lower(properties ->> 'shopifyCustomerId'));
    `,
  },
  {
    version: 10,
    name: "profile_fillfactor",
    sql: `
      -- Every applied batch rewrites its profiles' visit fields and its sessions' spans, columns
      -- no index covers: free room on each page lets those updates stay on the page (HOT) instead
      -- of adding an entry to every index of the table.
      alter table profiles set (fillfactor = 70);
      alter table sessions set (fillfactor = 70);
    `,
  },
  {
    version: 11,
    name: "order_line_items_in_orders",
    sql: `
      -- An order's line items are written and read with the order, never alone: kept on its row
      -- as a JSON array (price as exact 2-decimal text), an order costs one row, one set of index
      -- entries and no per-item foreign-key check to write (README: "The synced store").
      alter table orders add column line_items jsonb not null default '[]';
      update orders o set line_items = i.items
      from (
        select order_id,
               jsonb_agg(jsonb_build_object(
                 'title', title, 'quantity', quantity, 'price', price::text, 'sku', sku,
                 'product_id', product_id, 'variant_id', variant_id,
                 'variant_title', variant_title) order by position) as items
        from order_line_items group by order_id
      ) i
      where o.id = i.order_id;
      drop table order_line_items;
    `,
  },
  {
    version: 12,
    name: "orders_one_date_index",
    sql: `
      -- The order list reads each state from (brand_id, state, created_at desc, id) and merges
      -- them (lib/commerce/reads.ts), so this second date index is one less to maintain per order.
      drop index orders_brand_created_idx;
    `,
  },
  {
    version: 13,
    name: "orders_statement_reference_checks",
    sql: `
      -- An order's brand and contact are checked once per statement for all its rows, instead of
      -- by a foreign-key trigger per row (a third of an import's insert time). The rules are the
      -- foreign keys' and one more: the contact belongs to the order's brand.
      alter table orders drop constraint orders_brand_id_fkey;
      alter table orders drop constraint orders_contact_id_fkey;

      -- Lock (3084, hash of the brand): shared by every statement writing orders that name
      -- contacts, exclusive once a statement has deleted contacts of the brand. So a contact
      -- cannot be deleted between the check of an order naming it and that order's commit: the
      -- delete's unlinking waits for the order's transaction and then sees the order.
      create function orders_check_references() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' then
          if exists (select from new_rows n join old_rows o on o.id = n.id
                     where n.brand_id <> o.brand_id) then
            raise foreign_key_violation using message = 'an order cannot move to another brand';
          end if;
        elsif exists (select from new_rows n where not exists (
                        select from brands b where b.id = n.brand_id)) then
          raise foreign_key_violation using message = 'an order names a brand that does not exist';
        end if;
        perform pg_advisory_xact_lock_shared(3084, hashtext(r.brand_id))
        from (select distinct brand_id from new_rows where contact_id is not null) r
        order by r.brand_id;
        if exists (select from new_rows n where n.contact_id is not null and not exists (
                     select from contacts c where c.id = n.contact_id and c.brand_id = n.brand_id))
        then
          raise foreign_key_violation
            using message = 'an order names a contact that does not exist in its brand';
        end if;
        return null;
      end $$;
      create trigger orders_references_on_insert after insert on orders
        referencing new table as new_rows
        for each statement execute function orders_check_references();
      create trigger orders_references_on_update after update on orders
        referencing old table as old_rows new table as new_rows
        for each statement execute function orders_check_references();

      -- What "on delete set null" did: a deleted contact's orders keep no link to it.
      create function contacts_unlink_orders() returns trigger language plpgsql as $$
      begin
        perform pg_advisory_xact_lock(3084, hashtext(r.brand_id))
        from (select distinct brand_id from old_rows) r order by r.brand_id;
        update orders o set contact_id = null from old_rows d where o.contact_id = d.id;
        return null;
      end $$;
      create trigger contacts_unlink_orders after delete on contacts
        referencing old table as old_rows
        for each statement execute function contacts_unlink_orders();

      -- What "on delete cascade" did: a deleted brand's orders go with it.
      create function brands_delete_orders() returns trigger language plpgsql as $$
      begin
        delete from orders o using old_rows d where o.brand_id = d.id;
        return null;
      end $$;
      create trigger brands_delete_orders after delete on brands
        referencing old table as old_rows
        for each statement execute function brands_delete_orders();
    `,
  },
  {
    version: 14,
    name: "insight_generation_stripes",
    sql: `
      -- A brand's generation is the sum of its stripes; each writing connection bumps its own
      -- (lib/commerce/summaries.ts), so concurrent writers of one brand (an import's two) no
      -- longer wait for each other's commit on one counter row.
      alter table insight_generations add column stripe smallint not null default 0;
      alter table insight_generations drop constraint insight_generations_pkey;
      alter table insight_generations add primary key (brand_id, stripe);
    `,
  },
  {
    version: 15,
    name: "contacts_statement_brand_check",
    sql: `
      -- A contact's brand is checked once per statement for all its rows, as migration 13 does
      -- for orders, instead of by a foreign-key trigger per row (a fifth of the insert time of a
      -- batch of new contacts, on an import's serial path). As the key did, the check locks the
      -- brand's row for key share, so the brand cannot be deleted before the contacts commit.
      alter table contacts drop constraint contacts_brand_id_fkey;

      create function contacts_check_brand() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' then
          if exists (select from new_rows n join old_rows o on o.id = n.id
                     where n.brand_id <> o.brand_id) then
            raise foreign_key_violation using message = 'a contact cannot move to another brand';
          end if;
        end if;
        perform from brands b where b.id in (select brand_id from new_rows)
        order by b.id for key share;
        if exists (select from new_rows n where not exists (
                     select from brands b where b.id = n.brand_id)) then
          raise foreign_key_violation using message = 'a contact names a brand that does not exist';
        end if;
        return null;
      end $$;
      create trigger contacts_brand_on_insert after insert on contacts
        referencing new table as new_rows
        for each statement execute function contacts_check_brand();
      create trigger contacts_brand_on_update after update on contacts
        referencing old table as old_rows new table as new_rows
        for each statement execute function contacts_check_brand();

      -- What "on delete cascade" did: a deleted brand's contacts go with it, after its orders.
      create or replace function brands_delete_orders() returns trigger language plpgsql as $$
      begin
        delete from orders o using old_rows d where o.brand_id = d.id;
        delete from contacts c using old_rows d where c.brand_id = d.id;
        return null;
      end $$;
    `,
  },
  {
    version: 16,
    name: "brand_level_summaries",
    sql: `
      -- Brand-level figures recomputed with the other summaries (lib/commerce/summaries.ts), so
      -- that brand insights read a few rows instead of every customer's summary: completed-order
      -- revenue per UTC month, customers and spend per RFM cell, and the LTV totals and buckets
      -- on the snapshot. Snapshots without them are dropped: the next read refreshes.
      create table revenue_month_summaries (
        brand_id text not null references brands (id) on delete cascade,
        month date not null,
        order_count integer not null,
        revenue numeric not null,
        primary key (brand_id, month)
      );
      create table rfm_cell_summaries (
        brand_id text not null references brands (id) on delete cascade,
        r smallint not null,
        f smallint not null,
        m smallint not null,
        customers integer not null,
        spend numeric not null,
        primary key (brand_id, r, f, m)
      );
      delete from insight_snapshots;
      alter table insight_snapshots
        add column ltv_total numeric not null,
        add column ltv_customers integer not null,
        add column ltv_average numeric not null,
        add column ltv_buckets integer[] not null;
    `,
  },
  {
    version: 17,
    name: "contacts_brand_check_hash_join",
    sql: `
      -- Version 15's "exists" over the old and new rows was planned for a fast first row: a
      -- nested loop over two unindexed transition tables, quadratic in the rows updated. An
      -- aggregate reads every pair anyway, so the planner joins them on the id by hash.
      create or replace function contacts_check_brand() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' then
          if (select bool_or(n.brand_id <> o.brand_id)
              from new_rows n join old_rows o on o.id = n.id) then
            raise foreign_key_violation using message = 'a contact cannot move to another brand';
          end if;
        end if;
        perform from brands b where b.id in (select brand_id from new_rows)
        order by b.id for key share;
        if exists (select from new_rows n where not exists (
                     select from brands b where b.id = n.brand_id)) then
          raise foreign_key_violation using message = 'a contact names a brand that does not exist';
        end if;
        return null;
      end $$;
    `,
  },
  {
    version: 18,
    name: "integrations_redacted_at",
    sql: `
      -- Set by Shopify's shop/redact, which erased the shop's data: the brand may not write
      -- (API keys, queued events, imports) until an operator reconnects the integration, which
      -- clears it.
      alter table integrations add column redacted_at timestamptz;
    `,
  },
];

// An arbitrary constant shared by every process that migrates this schema.
const _MIGRATION_LOCK_ID = 7_236_112_401;

/**
 * Applies pending migrations in one transaction under an advisory lock, so running it twice, or
 * from two processes at once, applies each migration exactly once.
 */
export async function migrate(
  sql: Sql,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number[]> {
  return await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${_MIGRATION_LOCK_ID})`;
    await tx`
      create table if not exists schema_migrations (
        version integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`;
    const rows = await tx<{ version: number }[]>`select version from schema_migrations`;
    const done = new Set(rows.map((row) => row.version));
    const applied: number[] = [];
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      await tx.unsafe(migration.sql).simple();
      await tx`
        insert into schema_migrations (version, name)
        values (${migration.version}, ${migration.name})`;
      applied.push(migration.version);
    }
    return applied;
  });
}

/** Versions of `migrations` not applied yet (all of them before the first migration). */
export async function pendingMigrations(
  sql: Sql,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number[]> {
  const [table] = await sql<{ exists: boolean }[]>`
    select to_regclass('schema_migrations') is not null as exists`;
  if (!table?.exists) return migrations.map((migration) => migration.version);
  const rows = await sql<{ version: number }[]>`select version from schema_migrations`;
  const done = new Set(rows.map((row) => row.version));
  return migrations.map((migration) => migration.version).filter((version) => !done.has(version));
}
