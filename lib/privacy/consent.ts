/**
 * Consent for delivery: a destination that requires a consent type delivers only the profiles
 * that have it granted now (`consents.<type>.status` GRANTED, and no `revokeDate` in the past),
 * as Unomi's `Consent.isConsentGrantedAtDate` decides. The delivery code calls
 * {@linkcode profileConsentGranted}, or puts {@linkcode consentGrantedSql} in its own statement.
 *
 * @module
 */
import type { Sql, Tx } from "../store/db.ts";

/** A predicate over a profile row aliased `p`: the consent type is granted at `now`. */
export function consentGrantedSql(sql: Sql | Tx, consentType: string, now: Date) {
  return sql`(p.consents -> ${consentType}::text ->> 'status' = 'GRANTED'
    and coalesce((p.consents -> ${consentType}::text ->> 'revokeDate')::timestamptz > ${now},
                 true))`;
}

/**
 * Of the scope's `profileIds`, those with `consentType` granted at `now` (a profile that is
 * missing, or another scope's, is not).
 */
export async function profileConsentGranted(
  sql: Sql | Tx,
  scope: string,
  profileIds: readonly string[],
  consentType: string,
  now: Date,
): Promise<Set<string>> {
  if (profileIds.length === 0) return new Set();
  const rows = await sql<{ item_id: string }[]>`
    select p.item_id from profiles p
    where p.scope = ${scope} and p.item_id = any(${[...profileIds]}::text[])
      and ${consentGrantedSql(sql, consentType, now)}`;
  return new Set(rows.map((row) => row.item_id));
}
