/**
 * Migration 1, "tenancy".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 1 of the schema. */
export const tenancy = {
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
};
