/**
 * Rows sent to PostgreSQL as one JSON parameter, for the set-based writes of lib/commerce
 * (`jsonb_to_recordset(...)`).
 *
 * @module
 */
import type { Sql, Tx } from "../store/db.ts";

/** `rows` as one JSON parameter; dates go as their ISO text, as `JSON.stringify` writes them. */
export function jsonRows(tx: Sql | Tx, rows: readonly object[]): ReturnType<Tx["json"]> {
  // postgres.js types `json` for JSON values only; rows of interfaces with Date fields serialize
  // the same way but are not assignable to that type.
  return tx.json(rows as never);
}
