/**
 * Erasing a person: first the engine's blocks (under the scope's write lock, so every event
 * accepted before the erase and applied after it is dropped), then their data everywhere: events,
 * sessions, profiles and aliases, the commerce contact and its personal fields, the link from
 * orders and subscriptions (their totals stay in the brand's revenue), their export documents,
 * and whatever the `erasers` given add (segment memberships, pending destination deliveries).
 *
 * @module
 */
import { markInsightsChanged } from "../commerce/summaries.ts";
import type { Sql, Tx } from "../store/db.ts";
import { holdScopeWrites } from "../tenancy/brands.ts";
import type { Identifier, IdentifierHasher } from "./identifiers.ts";
import { type BrandScope, findPerson, type Person, personHashes } from "./person.ts";

/**
 * One more place a person is erased from, run in the erase's transaction with the person's ids
 * (profiles and the ids merged into them) and identifiers; answers its own counts. The runtime
 * wires the audiences' (memberships, changes, destination deliveries) and the storefront's
 * (pixel claims).
 */
export type Eraser = (
  tx: Tx,
  target: BrandScope & Person,
) => Promise<Record<string, number>>;

/** What an erase needs. */
export interface EraseDeps {
  sql: Sql;
  now: () => Date;
  hasher: IdentifierHasher;
  /** Erasers of other capabilities, by name (see {@linkcode Eraser}). */
  erasers?: Readonly<Record<string, Eraser>>;
}

/** An erase to run: its request, brand and identifiers; `orderIds` from Shopify's redact. */
export interface EraseInput extends BrandScope {
  requestId: string;
  identifiers: readonly Identifier[];
  orderIds?: readonly string[];
}

/** What an erase found and removed. */
export type EraseCounts = Record<string, number>;

/**
 * Erases the person the identifiers name. Idempotent: run again, it finds nothing more to remove
 * (and the blocks it wrote stay). A person nobody knows completes with zero counts, and the
 * events already queued for the identifiers are still dropped.
 */
export async function erasePerson(deps: EraseDeps, input: EraseInput): Promise<EraseCounts> {
  const erasedAt = deps.now();
  // First, briefly holding the scope's writes: the blocks, seen by every apply after the commit.
  const person = await deps.sql.begin(async (tx) => {
    await holdScopeWrites(tx as unknown as Tx, input.scope);
    const found = await findPerson(tx as unknown as Tx, input, input.identifiers);
    await writeBlocks(tx as unknown as Tx, {
      scope: input.scope,
      kind: "erased",
      requestId: input.requestId,
      hashes: personHashes(found, input.identifiers, deps.hasher),
      receivedUntil: erasedAt,
    });
    return found;
  });
  // Then the data, with the writes of the scope flowing again: what the blocks drop cannot
  // come back meanwhile.
  return await deps.sql.begin(async (sql) => {
    const tx = sql as unknown as Tx;
    // A merge between the two steps may have absorbed another id: look again.
    const again = await findPerson(tx, input, input.identifiers);
    const merged: Person = {
      ...again,
      profileIds: [...new Set([...person.profileIds, ...again.profileIds])],
      contactIds: [...new Set([...person.contactIds, ...again.contactIds])],
    };
    const counts = await _eraseData(tx, input, merged, erasedAt);
    const target = { brandId: input.brandId, scope: input.scope, ...merged };
    for (const [name, eraser] of Object.entries(deps.erasers ?? {})) {
      for (const [key, value] of Object.entries(await eraser(tx, target))) {
        counts[`${name}_${key}`] = value;
      }
    }
    const shopifyIds = merged.shopifyCustomerIds.map((value) =>
      deps.hasher.hash({ kind: "shopify_customer_id", value })
    );
    await _deleteExports(tx, input.brandId, [
      ...personHashes(merged, input.identifiers, deps.hasher),
      ...shopifyIds,
      ...input.identifiers.map((identifier) => deps.hasher.hash(identifier)),
    ]);
    return counts;
  });
}

async function _eraseData(
  tx: Tx,
  input: EraseInput,
  person: Person,
  now: Date,
): Promise<EraseCounts> {
  const { scope, brandId } = input;
  const ids = person.profileIds;
  const events = await tx`
    delete from events where scope = ${scope} and profile_id = any(${ids}::text[])`;
  const sessions = await tx`
    delete from sessions where scope = ${scope} and profile_id = any(${ids}::text[])`;
  const aliases = await tx`
    delete from profile_aliases
    where scope = ${scope} and (profile_id = any(${ids}::text[]) or alias_id = any(${ids}::text[]))`;
  const profiles = await tx`
    delete from profiles where scope = ${scope} and item_id = any(${ids}::text[])`;
  const contacts = person.contactIds;
  // As Shopify's customers/redact: the orders keep their totals, lines and dates (the brand's
  // revenue) and lose their customer for good; a late webhook cannot attach one again.
  const orders = await tx`
    update orders set contact_id = null, customer_redacted_at = ${now}
    where brand_id = ${brandId}
      and (contact_id = any(${contacts}::text[])
        or external_id = any(${input.orderIds ?? []}::text[]))`;
  const subscriptions = await tx`
    update subscriptions set contact_id = null
    where brand_id = ${brandId} and contact_id = any(${contacts}::text[])`;
  const deleted = await tx`
    delete from contacts where brand_id = ${brandId} and id = any(${contacts}::text[])`;
  // The insight summaries drop the customer at their next refresh (attributed figures such as
  // LTV fall by the person's orders; the brand's revenue does not).
  if (deleted.count > 0 || orders.count > 0) await markInsightsChanged(tx, brandId);
  return {
    profiles: profiles.count,
    aliases: aliases.count,
    events: events.count,
    sessions: sessions.count,
    contacts: deleted.count,
    orders_unlinked: orders.count,
    subscriptions_unlinked: subscriptions.count,
  };
}

// An export of the person is their data too.
async function _deleteExports(tx: Tx, brandId: string, hashes: string[]): Promise<void> {
  await tx`
    delete from privacy_exports where request_id in (
      select id from privacy_requests
      where brand_id = ${brandId} and identifier_hash = any(${hashes}::text[]))`;
}

/** Writes the engine's blocks of a request; an erase's `receivedUntil` only moves forward. */
export async function writeBlocks(
  tx: Tx,
  input: {
    scope: string;
    kind: "erased" | "suppressed";
    requestId: string;
    hashes: readonly string[];
    receivedUntil: Date | null;
  },
): Promise<void> {
  if (input.hashes.length === 0) return;
  await tx`
    insert into privacy_blocks (scope, kind, id_hash, request_id, received_until)
    select ${input.scope}, ${input.kind}, h, ${input.requestId}, ${input.receivedUntil}
    from unnest(${input.hashes}::text[]) as h
    on conflict (scope, id_hash, kind) do update
      set request_id = excluded.request_id,
          received_until = greatest(privacy_blocks.received_until, excluded.received_until)`;
}
