import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { importNdjson } from "../../../lib/commerce/import.ts";
import { brandLtv, customerInsights } from "../../../lib/commerce/insights.ts";
import { orderImport } from "../../../lib/commerce/orders.ts";
import {
  currentSnapshot,
  INSIGHTS_REFRESH_LOCK,
  markInsightsChanged,
  refreshSummaries,
} from "../../../lib/commerce/summaries.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { DATABASE_URL, eventually, withBrandDatabase } from "../../test_support.ts";

const newId = monotonicFactory();
const T0 = new Date("2026-11-21T12:00:00Z");

function line(externalId: string, total: string, email = "ann@example.com") {
  return {
    external_id: externalId,
    number: `#${externalId}`,
    state: "complete",
    billing_status: "complete",
    total,
    currency_code: "USD",
    created_at: "2026-10-01T00:00:00Z",
    customer: { email },
    line_items: [{ title: "Tee", quantity: 1, price: total, product_id: "P1" }],
  };
}

async function importLines(sql: Sql, brandId: string, lines: unknown[]) {
  const text = lines.map((l) => JSON.stringify(l)).join("\n");
  const bytes = new TextEncoder().encode(text);
  return await importNdjson(
    sql,
    new Blob([bytes]).stream(),
    orderImport({ brandId, newId, now: T0 }),
  );
}

/** Reads at T0 + ms; these tests allow no staleness unless they say so. */
const at = (ms: number, maxStalenessSeconds: number) => ({
  now: new Date(T0.getTime() + ms),
  maxStalenessSeconds,
});

Deno.test("summaries: an outdated snapshot is served within the staleness window, then refreshed in the background", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    const started: Promise<unknown>[] = [];
    const at = (ms: number, maxStalenessSeconds: number) => ({
      now: new Date(T0.getTime() + ms),
      maxStalenessSeconds,
      background: (refresh: Promise<unknown>) => void started.push(refresh),
    });
    await importLines(sql, brandId, [line("1", "10.00")]);
    // No snapshot yet: the first read computes one.
    assert.equal((await brandLtv(sql, brandId, at(0, 120))).total_revenue, "10.00");
    await importLines(sql, brandId, [line("2", "5.50")]);
    // 119 s later the previous snapshot still answers (bounded staleness), nothing refreshes...
    assert.equal((await brandLtv(sql, brandId, at(119_000, 120))).total_revenue, "10.00");
    assert.equal(started.length, 0);
    // ...at 120 s the read is still given that snapshot, at once, and starts one refresh...
    const stale = await currentSnapshot(sql, brandId, at(0, 120));
    const served = await currentSnapshot(sql, brandId, at(120_000, 120));
    assert.deepEqual(served, stale);
    assert.equal(started.length, 1);
    await Promise.all(started);
    // ...whose snapshot the next reads get, with no further refresh while nothing is written.
    assert.equal((await brandLtv(sql, brandId, at(121_000, 120))).total_revenue, "15.50");
    assert.equal((await brandLtv(sql, brandId, at(999_000, 120))).total_revenue, "15.50");
    assert.equal(started.length, 1);
    // With no staleness allowed, the next read after a write sees it.
    await importLines(sql, brandId, [line("3", "1.00")]);
    assert.equal((await brandLtv(sql, brandId, at(999_000, 0))).total_revenue, "16.50");
    assert.equal(started.length, 1);
  });
});

Deno.test("summaries: a current snapshot is never recomputed; re-importing stored orders changes nothing", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    const lines = [line("1", "10.00"), line("2", "20.00", "bob@example.com")];
    await importLines(sql, brandId, lines);
    const first = await currentSnapshot(sql, brandId, at(0, 0));
    assert.equal(
      (await currentSnapshot(sql, brandId, at(5_000, 0))).refreshedAt.getTime(),
      T0.getTime(),
    );
    // The same file again writes nothing, so the snapshot stays current.
    assert.deepEqual(await importLines(sql, brandId, lines), { imported: 2, rejected: [] });
    const again = await currentSnapshot(sql, brandId, at(10_000, 0));
    assert.equal(again.generation, first.generation);
    assert.equal(again.refreshedAt.getTime(), T0.getTime());
    // A changed total is a write.
    await importLines(sql, brandId, [line("1", "11.00")]);
    const changed = await currentSnapshot(sql, brandId, at(20_000, 0));
    assert.ok(changed.generation > first.generation);
    const contact = await sql<{ id: string }[]>`
      select id from contacts where brand_id = ${brandId} and email = 'ann@example.com'`;
    const insights = await customerInsights(sql, brandId, contact[0]!.id, at(20_000, 0));
    assert.equal(insights.ltv, "11.00");
    assert.deepEqual(insights.top_products.map((p) => [p.product_id, p.revenue]), [[
      "P1",
      "11.00",
    ]]);
  });
});

Deno.test("summaries: a refresh already running elsewhere is not started twice", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    await importLines(sql, brandId, [line("1", "10.00")]);
    // Embedded PGlite is one session behind every connection: a lock held "elsewhere" needs a
    // server.
    if (!DATABASE_URL) return;
    const reserved = await sql.reserve();
    try {
      await reserved`begin`;
      await reserved`select pg_advisory_xact_lock(${INSIGHTS_REFRESH_LOCK}, hashtext(${brandId}))`;
      assert.equal(await refreshSummaries(sql, brandId, T0), null);
      await reserved`rollback`;
    } finally {
      reserved.release();
    }
    assert.notEqual(await refreshSummaries(sql, brandId, T0), null);
  });
});

Deno.test({
  name: "summaries: a refresh that committed after this one's snapshot is read, never a 500",
  // Embedded PGlite is one session behind every connection: a commit "elsewhere" needs a server.
  ignore: !DATABASE_URL,
  async fn() {
    await withBrandDatabase(async (sql, brandId) => {
      await importLines(sql, brandId, [line("1", "10.00")]);
      const [order] = await sql<{ contact_id: string }[]>`
        select contact_id from orders where brand_id = ${brandId}`;
      // Another refresh's rows, written after this refresh's snapshot is taken: the race when a
      // refresh commits and lets the lock go between the snapshot and the lock of the next.
      const other = await sql.reserve();
      let refresh: Promise<unknown> | undefined;
      try {
        await other`begin`;
        await other`
          insert into customer_summaries (brand_id, contact_id, order_count, spend, first_order_at,
                                          last_order_at, median_gap, currency_code, r, f, m)
          values (${brandId}, ${order!.contact_id}, 1, 10, ${T0}, ${T0}, null, 'USD', 1, 1, 1)`;
        refresh = refreshSummaries(sql, brandId, T0).then((r) => r, (err) => err);
        // The refresh's insert waits for this transaction's row.
        await eventually(async () => {
          // Inside a transaction the activity view is read once unless its snapshot is cleared.
          await other`select pg_stat_clear_snapshot()`;
          const [row] = await other<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'`;
          return row!.n > 0;
        });
        await other`commit`;
      } finally {
        other.release();
      }
      // Before: PostgresError duplicate key value violates unique constraint (a 500 page).
      assert.equal(await refresh, null);
      const snapshot = await currentSnapshot(sql, brandId, at(0, 0));
      assert.equal(snapshot.ltv.customers, 1);
      assert.equal(snapshot.ltv.total, "10.00");
    });
  },
});

Deno.test("summaries: markInsightsChanged bumps the brand's generation", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    const before = await currentSnapshot(sql, brandId, at(0, 0));
    await markInsightsChanged(sql, brandId);
    await markInsightsChanged(sql, brandId);
    const after = await currentSnapshot(sql, brandId, at(0, 0));
    assert.equal(after.generation, before.generation + 2);
  });
});

Deno.test({
  name: "summaries: two connections mark a brand changed without waiting for each other's commit",
  ignore: !DATABASE_URL,
  async fn() {
    await withBrandDatabase(async (sql, brandId) => {
      const before = await currentSnapshot(sql, brandId, at(0, 0));
      // Two connections on different stripes (a connection's stripe is its backend's pid).
      const held: Awaited<ReturnType<Sql["reserve"]>>[] = [];
      const stripes = new Set<number>();
      while (stripes.size < 2) {
        const connection = await sql.reserve();
        const [row] = await connection`select pg_backend_pid() % 64 as stripe`;
        if (stripes.has(row!.stripe)) connection.release();
        else (stripes.add(row!.stripe), held.push(connection));
      }
      const [first, second] = held as [typeof held[0], typeof held[0]];
      try {
        await first`begin`;
        await markInsightsChanged(first as unknown as Sql, brandId);
        // With one counter row this waited for the first transaction's commit, that is forever
        // here: the guard turns such a wait into a failure rather than a hung test.
        let guard: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          markInsightsChanged(second as unknown as Sql, brandId),
          new Promise((_, reject) => {
            guard = setTimeout(() => reject(new Error("the second mark waited")), 10_000);
          }),
        ]).finally(() => clearTimeout(guard));
        await first`commit`;
      } finally {
        first.release();
        second.release();
      }
      const after = await currentSnapshot(sql, brandId, at(0, 0));
      assert.equal(after.generation, before.generation + 2);
    });
  },
});
