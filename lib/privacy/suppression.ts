/**
 * Suppression: a suppressed person's later events (by profile id, merged ids, email or phone in
 * their properties) are dropped by the engine's admission hook before they are stored, until an
 * `unsuppress` lifts it. An erase leaves suppressions in place.
 *
 * @module
 */
import type { Sql, Tx } from "../store/db.ts";
import { writeBlocks } from "./erase.ts";
import type { Identifier, IdentifierHasher } from "./identifiers.ts";
import { type BrandScope, findPerson, personHashes } from "./person.ts";

/** Suppresses the person the identifiers name; answers what it found and blocked. */
export async function suppressPerson(
  deps: { sql: Sql; hasher: IdentifierHasher },
  input: BrandScope & { requestId: string; identifiers: readonly Identifier[] },
): Promise<Record<string, number>> {
  return await deps.sql.begin(async (sql) => {
    const tx = sql as unknown as Tx;
    const person = await findPerson(tx, input, input.identifiers);
    const hashes = personHashes(person, input.identifiers, deps.hasher);
    await writeBlocks(tx, {
      scope: input.scope,
      kind: "suppressed",
      requestId: input.requestId,
      hashes,
      receivedUntil: null,
    });
    return { profiles: person.rootIds.length, identifiers_blocked: hashes.length };
  });
}

/**
 * Lifts every suppression that blocks any of the person's identifiers (the whole of each: all it
 * blocked, not only the matching identifier).
 */
export async function unsuppressPerson(
  deps: { sql: Sql; hasher: IdentifierHasher },
  input: BrandScope & { identifiers: readonly Identifier[] },
): Promise<Record<string, number>> {
  return await deps.sql.begin(async (sql) => {
    const tx = sql as unknown as Tx;
    const person = await findPerson(tx, input, input.identifiers);
    const hashes = personHashes(person, input.identifiers, deps.hasher);
    const lifted = await tx<{ request_id: string }[]>`
      delete from privacy_blocks
      where scope = ${input.scope} and kind = 'suppressed' and request_id in (
        select request_id from privacy_blocks
        where scope = ${input.scope} and kind = 'suppressed' and id_hash = any(${hashes}::text[]))
      returning request_id`;
    return {
      suppressions_lifted: new Set(lifted.map((row) => row.request_id)).size,
      identifiers_unblocked: lifted.length,
    };
  });
}
