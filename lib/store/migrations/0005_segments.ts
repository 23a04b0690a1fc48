/**
 * Migration 5, "segments".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 5 of the schema. */
export const segments = {
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
};
