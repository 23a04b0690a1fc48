/**
 * Migration 28, "compact_membership".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 28 of the schema. */
export const compactMembership = {
  version: 28,
  name: "compact_membership",
  sql: `
      -- Membership kept in fewer rows (lib/audiences/changes.ts): a row per profile holding its
      -- segments, and a feed row per segment, change and write holding up to 1,000 profiles, so
      -- that a write of thousands of changes inserts tens of rows, not thousands.
      create table profile_segments (
        scope text not null,
        profile_id text not null,
        -- The segments the profile is in: segment id -> when it entered (ISO 8601). Never empty:
        -- a profile in no segment has no row.
        segments jsonb not null,
        primary key (scope, profile_id)
      );
      insert into profile_segments (scope, profile_id, segments)
      select scope, profile_id,
             jsonb_object_agg(segment_id, to_char(entered_at at time zone 'UTC',
                                                  'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
      from segment_members group by scope, profile_id;
      -- A change's position in the feed: its row's seq times 1,024 plus its index in the row
      -- (n, from 1). Positions grow in commit order within a scope; cursors hold them.
      create function segment_feed_position(seq bigint, n bigint) returns bigint
        language sql immutable parallel safe as $$ select seq * 1024 + n - 1 $$;
      -- The seq of the row holding a position: a reader starts its index scan there.
      create function segment_feed_seq(feed_position bigint) returns bigint
        language sql immutable parallel safe as $$ select feed_position / 1024 $$;
      create table segment_feed (
        seq bigint generated always as identity primary key,
        scope text not null,
        segment_id text not null,
        change text not null check (change in ('entered', 'exited')),
        at timestamptz not null,
        -- The profiles that entered or left, in feed order. An erased one is null: the others
        -- keep their positions.
        profile_ids text[] not null check (cardinality(profile_ids) between 1 and 1000),
        -- The public id of a change written before the feed was compacted (one per such row);
        -- a later change's id is derived from its position.
        legacy_id text
      );
      create index segment_feed_by_segment on segment_feed (scope, segment_id, seq);
      -- Kept out of line uncompressed: compressing each row's ids costs more than the write.
      alter table segment_feed alter column profile_ids set storage external;
      insert into segment_feed (seq, scope, segment_id, change, at, profile_ids, legacy_id)
      overriding system value
      select seq, scope, segment_id, change, at, array[profile_id], id
      from segment_changes order by seq;
      select setval(pg_get_serial_sequence('segment_feed', 'seq'),
                    coalesce((select max(seq) from segment_feed), 0) + 1, false);
      -- Destination cursors and deliveries held seqs of one-change rows: now positions.
      update destinations set cursor = segment_feed_position(cursor, 1) where cursor > 0;
      alter table destination_deliveries rename column first_seq to first_position;
      alter table destination_deliveries rename column last_seq to last_position;
      update destination_deliveries
      set first_position = segment_feed_position(first_position, 1),
          last_position = segment_feed_position(last_position, 1);
      drop table segment_members;
      drop table segment_changes;
      -- The former tables' shapes, for reading (and for operators): a row per membership, and a
      -- row per change with its position and id.
      create view segment_members as
      select p.scope, s.key as segment_id, p.profile_id, s.value::timestamptz as entered_at
      from profile_segments p cross join lateral jsonb_each_text(p.segments) as s;
      create view segment_changes as
      select segment_feed_position(f.seq, e.n) as position, f.seq as feed_seq,
             coalesce(f.legacy_id,
                      'chg_' || lpad(to_hex(segment_feed_position(f.seq, e.n)), 16, '0')) as id,
             f.scope, f.segment_id, e.profile_id, f.change, f.at
      from segment_feed f
      cross join lateral unnest(f.profile_ids) with ordinality as e(profile_id, n)
      where e.profile_id is not null;
    `,
};
