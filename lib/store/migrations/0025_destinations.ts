/**
 * Migration 25, "destinations".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 25 of the schema. */
export const destinations = {
  version: 25,
  name: "destinations",
  sql: `
      -- A brand's webhook destinations (lib/audiences/destinations.ts). \`cursor\` is the last
      -- segment_changes.seq made into a delivery; \`lease_until\` lets one process at a time
      -- deliver for a destination (a crashed holder's lease runs out).
      create table destinations (
        id text primary key,
        brand_id text not null,
        scope text not null,
        name text not null,
        type text not null check (type = 'webhook'),
        url text not null,
        secret text not null,
        segments text[] not null,
        cursor bigint not null default 0,
        lease_until timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index destinations_by_scope on destinations (scope, id);
      -- One POST to a destination (up to 100 changes), kept across its retries: \`payload\` is the
      -- whole body, so a retry sends the same bytes and ids. Retried until \`retry_until\`, then
      -- \`dead\` (a replay makes it pending again). It holds changes first_seq..last_seq.
      create table destination_deliveries (
        id text primary key,
        destination_id text not null references destinations (id) on delete cascade,
        scope text not null,
        payload text not null,
        count integer not null,
        first_seq bigint not null,
        last_seq bigint not null,
        status text not null check (status in ('pending', 'delivered', 'dead')),
        attempts integer not null default 0,
        last_status integer,
        last_error text,
        created_at timestamptz not null,
        next_attempt_at timestamptz not null,
        retry_until timestamptz not null,
        completed_at timestamptz
      );
      create index destination_deliveries_pending on destination_deliveries
        (destination_id, first_seq) where status = 'pending';
      create index destination_deliveries_recent on destination_deliveries (destination_id, id);
    `,
};
