/**
 * Migration 2, "engine_write_side".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 2 of the schema. */
export const engineWriteSide = {
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
};
