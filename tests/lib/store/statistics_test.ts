import assert from "node:assert/strict";
import type { Sql } from "../../../lib/store/db.ts";
import {
  ANALYZED_TABLES,
  refreshStatistics,
  startStatisticsRefresh,
} from "../../../lib/store/statistics.ts";
import { eventually, freshDatabase } from "../../test_support.ts";

/** The planner's row estimate of each table (-1 before its first ANALYZE). */
async function estimates(sql: Sql): Promise<Map<string, number>> {
  const rows = await sql<{ relname: string; reltuples: number }[]>`
    select relname, reltuples::float8 as reltuples from pg_class
    where relkind = 'r' and relname = any(${[...ANALYZED_TABLES]}::text[])`;
  return new Map(rows.map((r) => [r.relname, r.reltuples]));
}

/** `sql` whose `unsafe` calls are counted. */
function counting(sql: Sql): { sql: Sql; calls: () => number } {
  let calls = 0;
  const proxy = new Proxy(sql, {
    get(target, key, receiver) {
      if (key !== "unsafe") return Reflect.get(target, key, receiver);
      return (...args: Parameters<Sql["unsafe"]>) => {
        calls++;
        return target.unsafe(...args);
      };
    },
  });
  return { sql: proxy, calls: () => calls };
}

Deno.test("refreshStatistics: the planner learns every listed table's size", async () => {
  const db = await freshDatabase();
  try {
    await db.sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      select 'a.myshopify.com', 'p' || n, '{}'::jsonb, 'server', now(), now()
      from generate_series(1, 250) as n`;
    await refreshStatistics(db.sql);
    const after = await estimates(db.sql);
    assert.deepEqual([...after.keys()].sort(), [...ANALYZED_TABLES].sort());
    assert.equal(after.get("profiles"), 250);
    // Analyzed, even when empty: no table is left at "never analyzed".
    for (const [table, rows] of after) assert.ok(rows >= 0, `${table}: ${rows}`);
  } finally {
    await db.close();
  }
});

Deno.test("startStatisticsRefresh: runs at once and on every interval; stop waits for a run", async () => {
  const db = await freshDatabase();
  try {
    const { sql, calls } = counting(db.sql);
    const stop = startStatisticsRefresh({
      sql,
      intervalMs: 50,
      onError: (err) => assert.fail(String(err)),
    });
    assert.equal(calls(), 1, "the first run starts immediately");
    await eventually(() => calls() >= 3);
    await stop();
    const stopped = calls();
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal(calls(), stopped, "no run after stop");
  } finally {
    await db.close();
  }
});

Deno.test("startStatisticsRefresh: a failed run is reported and retried at the next tick", async () => {
  const db = await freshDatabase();
  await db.close();
  const errors: unknown[] = [];
  const stop = startStatisticsRefresh({
    sql: db.sql,
    intervalMs: 50,
    onError: (err) => errors.push(err),
  });
  try {
    await eventually(() => errors.length >= 2);
  } finally {
    await stop();
  }
});
