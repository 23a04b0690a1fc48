/**
 * The audit of privacy requests: one row per request (who asked, when, the outcome and counts),
 * with the identifier only as its keyed hash; it outlives the request, the person and the shop.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";

/** One audited request. */
export interface AuditEntry {
  request_id: string;
  type: string;
  requested_by: string;
  identifier_hash: string;
  requested_at: string;
  outcome: string;
  counts: Record<string, number>;
  completed_at: string | null;
}

/** The brand's audited requests, newest first (at most `limit`). */
export async function listAudit(sql: Sql, brandId: string, limit = 1000): Promise<AuditEntry[]> {
  const rows = await sql<
    (Omit<AuditEntry, "requested_at" | "completed_at"> & {
      requested_at: Date;
      completed_at: Date | null;
    })[]
  >`
    select request_id, type, requested_by, identifier_hash, requested_at, outcome, counts,
           completed_at
    from privacy_audit where brand_id = ${brandId}
    order by requested_at desc, request_id desc limit ${limit}`;
  return rows.map((row) => ({
    ...row,
    requested_at: row.requested_at.toISOString(),
    completed_at: row.completed_at?.toISOString() ?? null,
  }));
}
