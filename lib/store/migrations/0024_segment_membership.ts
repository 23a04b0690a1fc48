/**
 * Migration 24, "segment_membership".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 24 of the schema. */
export const segmentMembership = {
  version: 24,
  name: "segment_membership",
  sql: `
      -- Who is in each segment since when (lib/audiences), maintained from the diff of each
      -- evaluation, and the append-only feed of who entered or left it. A consumer of the feed
      -- resumes after a seq: changes are appended in commit order.
      create table segment_members (
        scope text not null,
        segment_id text not null,
        profile_id text not null,
        entered_at timestamptz not null,
        primary key (scope, segment_id, profile_id)
      );
      -- A profile's memberships, read when its profile is re-evaluated or erased.
      create index segment_members_by_profile on segment_members (scope, profile_id);
      create table segment_changes (
        seq bigint generated always as identity primary key,
        id text not null unique,
        scope text not null,
        segment_id text not null,
        profile_id text not null,
        change text not null check (change in ('entered', 'exited')),
        at timestamptz not null
      );
      create index segment_changes_by_segment on segment_changes (scope, segment_id, seq);
    `,
};
