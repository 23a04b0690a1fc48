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
  clock: { now: () => Date },
): Promise<Record<string, number>> {
  const ids = [...person.profileIds];
  if (ids.length === 0) return { memberships: 0, changes: 0, deliveries: 0 };
  await lockMembership(tx, person.scope);
  const changes = await _eraseFeedEntries(tx, person.scope, ids);
  const deliveries = await _scrubDeliveries(tx, person.scope, ids);
  const memberships = await exitProfiles(tx, {
    scope: person.scope,
    profileIds: ids,
    now: clock.now(),
  });
  return { memberships, changes, deliveries };
}

/**
 * Blanks the person's entries in the scope's feed rows (null: the other entries keep their
 * positions, so cursors and ids stay valid); a row left blank is deleted. Answers the entries.
 */
async function _eraseFeedEntries(tx: Tx, scope: string, ids: string[]): Promise<number> {
  const [row] = await tx<{ n: number }[]>`
    with hit as (
      select f.seq,
        array(select case when e.p = any(${ids}::text[]) then null else e.p end
              from unnest(f.profile_ids) with ordinality as e(p, n) order by e.n) as kept,
        (select count(*) from unnest(f.profile_ids) as e(p) where e.p = any(${ids}::text[]))
          as erased
      from segment_feed f
      where f.scope = ${scope} and f.profile_ids && ${ids}::text[]),
    blank as (
      delete from segment_feed f using hit h
      where f.seq = h.seq and cardinality(array_remove(h.kept, null)) = 0),
    kept as (
      update segment_feed f set profile_ids = h.kept from hit h
      where f.seq = h.seq and cardinality(array_remove(h.kept, null)) > 0)
    select coalesce(sum(erased), 0)::int as n from hit`;
  return row!.n;
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
