/**
 * Event volume of a scope per UTC day, read on the events' type index without scanning the
 * scope's events outside the window.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";

const _DAY_MS = 86_400_000;

/** Days of event volume the insights show (GET /cdp/insights/events, the dashboard). */
export const EVENT_VOLUME_DAYS = 30;

/**
 * Events per UTC day over the last `days` days up to and including today, every day listed
 * (zero when none). The scope's event types are walked on `events_type_idx` one type at a time
 * (a loose index scan), and each type's window is a range of that index, so the cost follows the
 * window's events, not the scope's history. Each type is counted inside its own lateral subquery:
 * as a plain join the planner scanned the whole table instead.
 */
export async function eventVolumeByDay(
  sql: Sql,
  scope: string,
  input: { now: Date; days: number },
): Promise<{ day: string; events: number }[]> {
  const today = Math.floor(input.now.getTime() / _DAY_MS) * _DAY_MS;
  const since = new Date(today - (input.days - 1) * _DAY_MS);
  const until = new Date(today + _DAY_MS);
  // The planner sizes the type walk at a hundred types and the statement's cost past JIT's
  // threshold; compiling it took longer than counting, so JIT is off for this statement.
  const rows = await sql.begin(async (t) => {
    const tx = t as unknown as Sql;
    await tx`select set_config('jit', 'off', true)`;
    return await tx<{ day: string; n: number }[]>`
    with recursive types (event_type) as (
      (select event_type from events where scope = ${scope} order by event_type limit 1)
      union all
      select (select e.event_type from events e
              where e.scope = ${scope} and e.event_type > t.event_type
              order by e.event_type limit 1)
      from types t where t.event_type is not null
    )
    select to_char(w.day, 'YYYY-MM-DD') as day, sum(w.n)::int as n
    from types t cross join lateral (
      select date_trunc('day', e.time_stamp, 'UTC') as day, count(*) as n
      from events e
      where e.scope = ${scope} and e.event_type = t.event_type
        and e.time_stamp >= ${since} and e.time_stamp < ${until}
      group by 1
    ) w
    where t.event_type is not null
    group by 1`;
  });
  const counts = new Map(rows.map((row) => [row.day, row.n]));
  return Array.from({ length: input.days }, (_, i) => {
    const day = new Date(since.getTime() + i * _DAY_MS).toISOString().slice(0, 10);
    return { day, events: counts.get(day) ?? 0 };
  });
}
