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
 * At most `limit` changes of the segment after position `afterSeq` ("0": from the start), in
 * the order they were committed, and the position after the last one (`afterSeq` when none).
 */
export async function readChanges(
  sql: Sql,
  input: { scope: string; segmentId: string; afterSeq: string; limit: number },
): Promise<{ list: FeedChange[]; lastSeq: string }> {
  const rows = await sql<
    { seq: string; id: string; profile_id: string; change: "entered" | "exited"; at: Date }[]
  >`
    select seq::text as seq, id, profile_id, change, at from segment_changes
    where scope = ${input.scope} and segment_id = ${input.segmentId}
      and seq > ${input.afterSeq}::bigint
    order by seq
    limit ${input.limit}`;
  return {
    list: rows.map((row) => ({
      id: row.id,
      profileId: row.profile_id,
      change: row.change,
      at: row.at.toISOString(),
    })),
    lastSeq: rows.at(-1)?.seq ?? input.afterSeq,
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
           count(*) filter (where change = 'entered')::int as entered,
           count(*) filter (where change = 'exited')::int as exited
    from segment_changes
    where scope = ${input.scope} and segment_id = ${input.segmentId} and at >= ${start}
    group by 1`;
  const byDay = new Map(rows.map((row) => [row.day, row]));
  return Array.from({ length: input.days }, (_, i) => {
    const day = new Date(start.getTime() + i * 86_400_000).toISOString().slice(0, 10);
    const row = byDay.get(day);
    return { day, entered: row?.entered ?? 0, exited: row?.exited ?? 0 };
  });
}
