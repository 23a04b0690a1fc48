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
