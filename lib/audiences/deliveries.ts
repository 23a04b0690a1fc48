/**
 * The record of deliveries, as the API, the dashboard and the operator read it: recent deliveries
 * of a destination, each destination's health, and replaying dead-lettered deliveries (they become
 * pending again, with their ids and body, and a new retry window).
 *
 * @module
 */
import type { Sql } from "../store/db.ts";

/** One delivery as the API shows it. */
export interface DeliveryView {
  id: string;
  status: "pending" | "delivered" | "dead";
  /** Changes it carries. */
  count: number;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  nextAttemptAt: string | null;
  completedAt: string | null;
}

interface _Row {
  id: string;
  status: DeliveryView["status"];
  count: number;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  created_at: Date;
  next_attempt_at: Date;
  completed_at: Date | null;
}

/** A page of the destination's deliveries, newest first; `status` narrows them. */
export async function recentDeliveries(
  sql: Sql,
  destinationId: string,
  options: { limit: number; offset: number; status?: DeliveryView["status"] },
): Promise<{ list: DeliveryView[]; total: number }> {
  const where = sql`where destination_id = ${destinationId}
    ${options.status ? sql`and status = ${options.status}` : sql``}`;
  const rows = await sql<_Row[]>`
    select id, status, count, attempts, last_status, last_error, created_at, next_attempt_at,
      completed_at
    from destination_deliveries ${where}
    order by id desc limit ${options.limit} offset ${options.offset}`;
  const [counted] = await sql<{ n: number }[]>`
    select count(*)::int as n from destination_deliveries ${where}`;
  return { list: rows.map(_view), total: counted!.n };
}

function _view(row: _Row): DeliveryView {
  return {
    id: row.id,
    status: row.status,
    count: row.count,
    attempts: row.attempts,
    lastStatus: row.last_status,
    lastError: row.last_error,
    createdAt: row.created_at.toISOString(),
    nextAttemptAt: row.status === "pending" ? row.next_attempt_at.toISOString() : null,
    completedAt: row.completed_at?.toISOString() ?? null,
  };
}

/** A destination's delivery health, as the dashboard shows it. */
export interface DestinationHealth {
  id: string;
  name: string;
  url: string;
  segments: number;
  pending: number;
  dead: number;
  delivered24h: number;
  lastDeliveredAt: string | null;
  lastError: string | null;
  /** Changes of its segments logged but not yet made into deliveries. */
  backlog: number;
}

/** Every destination of the scope with its delivery health (`now` bounds the last 24 hours). */
export async function destinationsHealth(
  sql: Sql,
  scope: string,
  now: Date,
): Promise<DestinationHealth[]> {
  const since = new Date(now.getTime() - 86_400_000);
  const rows = await sql<(Omit<DestinationHealth, "lastDeliveredAt"> & { last: Date | null })[]>`
    select d.id, d.name, d.url, cardinality(d.segments) as segments,
      (select count(*)::int from destination_deliveries x
        where x.destination_id = d.id and x.status = 'pending') as pending,
      (select count(*)::int from destination_deliveries x
        where x.destination_id = d.id and x.status = 'dead') as dead,
      (select count(*)::int from destination_deliveries x
        where x.destination_id = d.id and x.status = 'delivered' and x.completed_at >= ${since})
        as "delivered24h",
      (select max(x.completed_at) from destination_deliveries x
        where x.destination_id = d.id and x.status = 'delivered') as last,
      (select x.last_error from destination_deliveries x
        where x.destination_id = d.id and x.last_error is not null
        order by x.id desc limit 1) as "lastError",
      (select count(*)::int from segment_changes c
        where c.scope = d.scope and c.segment_id = any(d.segments)
          and c.feed_seq >= segment_feed_seq(d.cursor) and c.position > d.cursor) as backlog
    from destinations d where d.scope = ${scope} order by d.id`;
  return rows.map(({ last, ...row }) => ({ ...row, lastDeliveredAt: last?.toISOString() ?? null }));
}

/**
 * Makes dead-lettered deliveries pending again (due now, retried for `retryMs` more), with their
 * ids and body: those of one destination, or the one `deliveryId`. Answers the ids replayed.
 */
export async function replayDeliveries(
  sql: Sql,
  target: { destinationId?: string; deliveryId?: string },
  now: Date,
  retryMs: number,
): Promise<string[]> {
  const until = new Date(now.getTime() + retryMs);
  const rows = await sql<{ id: string }[]>`
    update destination_deliveries set status = 'pending', next_attempt_at = ${now},
      retry_until = ${until}, completed_at = null
    where status = 'dead'
      ${target.destinationId ? sql`and destination_id = ${target.destinationId}` : sql``}
      ${target.deliveryId ? sql`and id = ${target.deliveryId}` : sql``}
    returning id`;
  return rows.map((row) => row.id).sort();
}
