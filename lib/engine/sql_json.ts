/**
 * Binding a value as one json parameter of a query: postgres.js types `json()` as `JSONValue`,
 * which typed rows (interfaces without an index signature) do not satisfy, so the one cast
 * lives here.
 *
 * @module
 */
import type { Sql, Tx } from "../store/db.ts";

/** `value` as one json parameter of `sql` (cast with `::jsonb` in the query). */
export function jsonParam(sql: Sql | Tx, value: unknown): ReturnType<Sql["json"]> {
  return sql.json(value as never);
}
