/**
 * What erasing a person (lib/privacy) removes from the audiences: their membership history (the
 * members and change rows that name them) and their entries in every kept destination delivery,
 * sent or not. Then one `exited` change per segment they were in, naming only the profile id, so
 * each destination hears that they left its audience (its receiver already holds that id; the
 * delivery carries no identity, the profile being gone).
 *
 * @module
 */
import type { Tx } from "../store/db.ts";
import { lockMembership } from "./changes.ts";
import { exitProfiles } from "./membership.ts";

/** The person an erase names: the scope and every profile id (merged ones included). */
export interface ErasedPerson {
  scope: string;
  profileIds: readonly string[];
}

/** Erases the person from the audiences in `tx` (the erase's transaction); answers its counts. */
export async function eraseFromAudiences(
  tx: Tx,
  person: ErasedPerson,
  clock: { now: () => Date; newId: () => string },
): Promise<Record<string, number>> {
  const ids = [...person.profileIds];
  if (ids.length === 0) return { memberships: 0, changes: 0, deliveries: 0 };
  await lockMembership(tx, person.scope);
  const changes = await tx`
    delete from segment_changes
    where scope = ${person.scope} and profile_id = any(${ids}::text[])`;
  const deliveries = await _scrubDeliveries(tx, person.scope, ids);
  const memberships = await exitProfiles(tx, {
    scope: person.scope,
    profileIds: ids,
    now: clock.now(),
    newId: clock.newId,
  });
  return { memberships, changes: changes.count, deliveries };
}

interface _Payload {
  deliveries: { profile?: { id?: string } }[];
}

/**
 * Takes the person's entries out of the scope's kept delivery bodies; a body left empty is
 * deleted. A pending one then sends the others' entries, under its same delivery ids.
 */
async function _scrubDeliveries(tx: Tx, scope: string, ids: string[]): Promise<number> {
  const rows = await tx<{ id: string; payload: string }[]>`
    select id, payload from destination_deliveries
    where scope = ${scope}
      and exists (
        select 1 from jsonb_array_elements(payload::jsonb -> 'deliveries') d
        where d -> 'profile' ->> 'id' = any(${ids}::text[]))`;
  const erased = new Set(ids);
  let removed = 0;
  for (const row of rows) {
    const payload = JSON.parse(row.payload) as _Payload;
    const kept = payload.deliveries.filter((d) => !erased.has(d.profile?.id ?? ""));
    removed += payload.deliveries.length - kept.length;
    if (kept.length === 0) {
      await tx`delete from destination_deliveries where id = ${row.id}`;
    } else {
      await tx`
        update destination_deliveries
        set payload = ${JSON.stringify({ ...payload, deliveries: kept })}, count = ${kept.length}
        where id = ${row.id}`;
    }
  }
  return removed;
}
