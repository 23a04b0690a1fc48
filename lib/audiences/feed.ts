/**
 * The membership feed's read side: a segment's changes after a position, oldest first (the
 * change feed route), and its entries and exits counted per day (the dashboard's segment page).
 *
 * @module
 */
import type { Sql } from "../store/db.ts";

/** One change as the feed shows it. */
export interface FeedChange {
  id: string;
  profileId: string;
  change: "entered" | "exited";
  at: string;
}

/**
 * At most `limit` changes of the segment after feed position `after` ("0": from the start), in
 * the order they were committed, and the position of the last one (`after` when none).
 */
export async function readChanges(
  sql: Sql,
  input: { scope: string; segmentId: string; after: string; limit: number },
): Promise<{ list: FeedChange[]; last: string }> {
  const rows = await sql<
    { position: string; id: string; profile_id: string; change: "entered" | "exited"; at: Date }[]
  >`
    select c.position::text as position, c.id, c.profile_id, c.change, c.at
    from segment_changes c
    where c.scope = ${input.scope} and c.segment_id = ${input.segmentId}
      and c.feed_seq >= segment_feed_seq(${input.after}::bigint)
      and c.position > ${input.after}::bigint
    order by c.feed_seq, c.position
    limit ${input.limit}`;
  return {
    list: rows.map((row) => ({
      id: row.id,
      profileId: row.profile_id,
      change: row.change,
      at: row.at.toISOString(),
    })),
    last: rows.at(-1)?.position ?? input.after,
  };
}

/** Entries and exits of one UTC day. */
export interface MembershipDay {
  day: string;
  entered: number;
  exited: number;
}

/** The segment's entries and exits per UTC day over the `days` days ending with `now`'s. */
export async function membershipHistory(
  sql: Sql,
  input: { scope: string; segmentId: string; now: Date; days: number },
): Promise<MembershipDay[]> {
  const end = Date.UTC(
    input.now.getUTCFullYear(),
    input.now.getUTCMonth(),
    input.now.getUTCDate(),
  );
  const start = new Date(end - (input.days - 1) * 86_400_000);
  const rows = await sql<{ day: string; entered: number; exited: number }[]>`
    select to_char(date_trunc('day', at at time zone 'UTC'), 'YYYY-MM-DD') as day,
           coalesce(sum(cardinality(array_remove(profile_ids, null)))
                      filter (where change = 'entered'), 0)::int as entered,
           coalesce(sum(cardinality(array_remove(profile_ids, null)))
                      filter (where change = 'exited'), 0)::int as exited
    from segment_feed
    where scope = ${input.scope} and segment_id = ${input.segmentId} and at >= ${start}
    group by 1`;
  const byDay = new Map(rows.map((row) => [row.day, row]));
  return Array.from({ length: input.days }, (_, i) => {
    const day = new Date(start.getTime() + i * 86_400_000).toISOString().slice(0, 10);
    const row = byDay.get(day);
    return { day, entered: row?.entered ?? 0, exited: row?.exited ?? 0 };
  });
}
