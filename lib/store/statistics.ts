/**
 * Refreshing planner statistics in embedded mode, which has no autovacuum.
 *
 * @module
 */
/**
 * Planner statistics for embedded mode. PostgreSQL's autovacuum keeps them current on a server;
 * embedded PGlite runs no background workers, so without this its statistics stay those of the
 * empty tables the migrations created, and the planner keeps choosing plans made for empty
 * tables (a brand-wide scan where a primary-key probe was meant) however large the brand grows.
 */
import type { Sql } from "./db.ts";

/**
 * The tables whose plans depend on their size: the engine's, segment membership's, commerce's
 * and the summaries.
 */
export const ANALYZED_TABLES = [
  "profiles",
  "profile_aliases",
  "sessions",
  "events",
  "segments",
  "profile_segments",
  "segment_feed",
  "contacts",
  "orders",
  "subscriptions",
  "customer_summaries",
  "product_summaries",
] as const;

/** Refreshes the planner statistics of {@linkcode ANALYZED_TABLES} (ANALYZE samples each). */
export async function refreshStatistics(sql: Sql): Promise<void> {
  // Names from the constant list above, never input.
  await sql.unsafe(`analyze ${ANALYZED_TABLES.join(", ")}`);
}

/**
 * Refreshes statistics now and every `intervalMs`, one run at a time (a run still going skips
 * the next tick). A failure is passed to `onError` and retried at the next tick. Returns a stop
 * function that waits for a run in progress.
 */
export function startStatisticsRefresh(
  deps: { sql: Sql; intervalMs: number; onError: (err: unknown) => void },
): () => Promise<void> {
  let running: Promise<void> | null = null;
  const tick = () => {
    if (running) return;
    running = refreshStatistics(deps.sql).catch(deps.onError).finally(() => running = null);
  };
  tick();
  const timer = setInterval(tick, deps.intervalMs);
  return async () => {
    clearInterval(timer);
    await running;
  };
}
