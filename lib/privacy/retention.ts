/**
 * Event retention: a brand's events older than its `event_retention_days` are deleted (default:
 * kept for ever). The minutely upkeep enforces a brand whose setting changed since its last sweep
 * (a change clears `retention_enforced_at`) and every brand once a day, in bounded batches so that
 * ingest of the same brand keeps flowing. Sessions and profiles' visit figures stay.
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import type { Sql } from "../store/db.ts";

/** Events deleted per statement: each is short, so the brand's ingest is never held long. */
const _BATCH = 10_000;
const _DAY_MS = 86_400_000;

/** Sets (or, with null, removes) a brand's retention; the next upkeep enforces it. */
export async function setEventRetention(
  sql: Sql,
  brandId: string,
  days: number | null,
): Promise<void> {
  const updated = await sql`
    update brands set event_retention_days = ${days}, retention_enforced_at = null
    where id = ${brandId}`;
  if (updated.count === 0) throw new DomainError("not_found", `no brand ${brandId}`);
}

/** A brand's retention in days, or null (kept for ever). */
export async function readEventRetention(sql: Sql, brandId: string): Promise<number | null> {
  const [row] = await sql<{ days: number | null }[]>`
    select event_retention_days as days from brands where id = ${brandId}`;
  return row?.days ?? null;
}

/**
 * Deletes the events past retention of every brand due (changed since its last sweep, or swept
 * over a day ago); answers the brands swept and the events deleted.
 */
export async function enforceRetention(
  sql: Sql,
  now: Date,
): Promise<{ brands: number; events: number }> {
  const due = await sql<{ id: string; scope: string; days: number }[]>`
    select b.id, i.shop_domain as scope, b.event_retention_days as days
    from brands b join integrations i on i.brand_id = b.id and i.provider = 'shopify'
    where b.event_retention_days is not null
      and (b.retention_enforced_at is null
        or b.retention_enforced_at <= ${new Date(now.getTime() - _DAY_MS)})
    order by b.id`;
  let events = 0;
  for (const brand of due) {
    const cutoff = new Date(now.getTime() - brand.days * _DAY_MS);
    for (;;) {
      const deleted = await sql`
        delete from events where (scope, id) in (
          select scope, id from events
          where scope = ${brand.scope} and time_stamp < ${cutoff}
          limit ${_BATCH})`;
      events += deleted.count;
      if (deleted.count < _BATCH) break;
    }
    // A setting changed meanwhile stays due.
    await sql`update brands set retention_enforced_at = ${now}
              where id = ${brand.id} and event_retention_days = ${brand.days}`;
  }
  return { brands: due.length, events };
}
