/**
 * The offset window of list reads: how far offset paging reaches, and counting a query's rows no
 * further than that (lib/http/pagination.ts pages within it; lib/engine and lib/commerce count).
 *
 * @module
 */
import type postgres from "postgres";
import type { Sql } from "./db.ts";

/** Rows reachable by offset paging. */
export const OFFSET_WINDOW = 10_000;

/**
 * Counts the rows of `rows` up to the window + 1: the contract caps totalSize at the window, so
 * counting further is wasted work.
 */
export async function countToWindow(
  sql: Sql,
  rows: postgres.PendingQuery<postgres.Row[]>,
): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from (${rows} limit ${OFFSET_WINDOW + 1}) capped`;
  return row!.n;
}
