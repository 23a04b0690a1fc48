/**
 * Migration 6, "commerce".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 6 of the schema. */
export const commerce = {
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
};
