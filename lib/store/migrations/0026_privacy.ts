/**
 * Migration 26, "privacy".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 26 of the schema. */
export const privacy = {
  version: 26,
  name: "privacy",
  sql: `
      -- Data-subject requests (lib/privacy, docs/privacy.md). The identifiers are personal data:
      -- an erase clears them when it completes; the audit below keeps only their keyed hash.
      create table privacy_requests (
        id text primary key,
        brand_id text not null references brands (id) on delete cascade,
        scope text not null,
        type text not null check (type in ('erase', 'export', 'suppress', 'unsuppress')),
        status text not null check (status in ('pending', 'running', 'completed', 'failed')),
        identifier text,
        extra_identifiers text[] not null default '{}',
        identifier_hash text not null,
        requested_by text not null,
        details jsonb not null default '{}',
        counts jsonb not null default '{}',
        dropped bigint not null default 0,
        error text,
        created_at timestamptz not null,
        started_at timestamptz,
        completed_at timestamptz
      );
      create index privacy_requests_brand_idx on privacy_requests (brand_id, created_at desc, id desc);
      create index privacy_requests_open_idx on privacy_requests (status, created_at)
        where status in ('pending', 'running');

      -- An export's document, downloadable until the person is erased or the shop redacted.
      create table privacy_exports (
        request_id text primary key references privacy_requests (id) on delete cascade,
        document text not null,
        created_at timestamptz not null
      );

      -- What the engine drops before storing (its admission hook): keyed hashes of profile ids,
      -- emails and phones. 'erased': events received at or before received_until (accepted
      -- before the erase) never bring the person back; 'suppressed': every event, until lifted.
      create table privacy_blocks (
        scope text not null,
        kind text not null check (kind in ('erased', 'suppressed')),
        id_hash text not null,
        request_id text not null,
        received_until timestamptz,
        -- Looked up by scope and hash on every apply, whatever the kind.
        primary key (scope, id_hash, kind)
      );
      create index privacy_blocks_request_idx on privacy_blocks (request_id);

      -- Events dropped by suppression or erasure, per scope and UTC day (the usage command).
      create table privacy_dropped_daily (
        scope text not null,
        day date not null,
        events bigint not null,
        primary key (scope, day)
      );

      -- Every request's record: who, when, outcome, counts; the identifier only as a keyed hash.
      -- No foreign key: it outlives the request and shop/redact.
      create table privacy_audit (
        request_id text primary key,
        brand_id text not null,
        type text not null,
        requested_by text not null,
        identifier_hash text not null,
        requested_at timestamptz not null,
        outcome text not null,
        counts jsonb not null default '{}',
        completed_at timestamptz
      );
      create index privacy_audit_brand_idx on privacy_audit (brand_id, requested_at desc);

      -- Unomi's consents map (typeIdentifier -> {scope, typeIdentifier, status, statusDate,
      -- revokeDate}), maintained by modifyConsent events.
      alter table profiles add column consents jsonb not null default '{}';

      -- Event retention in days; null keeps events for ever. retention_enforced_at is the
      -- last sweep of the brand: a change clears it, so the minutely sweep runs at once.
      alter table brands add column event_retention_days integer
        check (event_retention_days is null or event_retention_days > 0);
      alter table brands add column retention_enforced_at timestamptz;
    `,
};
