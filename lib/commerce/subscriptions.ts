/**
 * Subscription writes: subscription contract lines stored set-based, each replacing the contract
 * with the same external id; the steps of `subscriptions import`.
 *
 * @module
 */
import { jsonParam, type Tx } from "../store/db.ts";
import type { ImportSteps } from "./import.ts";
import { lastPerExternalId, lineImport, type LineWriting, upsertLines } from "./line_writes.ts";
import { type SubscriptionLine, SubscriptionLineSchema } from "./order_lines.ts";

/**
 * Stores subscription lines set-based, each replacing the contract with the same external id,
 * with their customers' contacts in the same transaction. Returns each line's subscription id.
 */
export function upsertSubscriptions(
  tx: Tx,
  input: LineWriting & { lines: SubscriptionLine[] },
): Promise<string[]> {
  return upsertLines(tx, input, writeSubscriptions);
}

/** Stores subscription lines whose contacts are already resolved (`contactIds`, one per line). */
export async function writeSubscriptions(
  tx: Tx,
  input: LineWriting & { lines: SubscriptionLine[]; contactIds: (string | null)[] },
): Promise<string[]> {
  const lines = lastPerExternalId(input.lines, input.contactIds);
  const rows = lines.map((line) => ({
    id: `sub_${input.newId()}`,
    external_id: line.external_id,
    status: line.status,
    next_billing_date: line.next_billing_date ?? null,
    contact_id: line.contactId,
  }));
  const stored = await tx<{ id: string; external_id: string }[]>`
    insert into subscriptions (id, brand_id, external_id, status, next_billing_date, contact_id,
                               created_at, updated_at)
    select x.id, ${input.brandId}, x.external_id, x.status, x.next_billing_date, x.contact_id,
           ${input.now}, ${input.now}
    from jsonb_to_recordset(${jsonParam(tx, rows)}::jsonb) as x(
      id text, external_id text, status text, next_billing_date timestamptz, contact_id text)
    on conflict (brand_id, external_id) do update set
      status = excluded.status, next_billing_date = excluded.next_billing_date,
      contact_id = excluded.contact_id, updated_at = excluded.updated_at
    returning id, external_id`;
  const idOf = new Map(stored.map((row) => [row.external_id, row.id]));
  return input.lines.map((line) => idOf.get(line.external_id)!);
}

/** Stores one subscription line; see {@linkcode upsertSubscriptions}. */
export async function upsertSubscription(
  tx: Tx,
  input: LineWriting & { line: SubscriptionLine },
): Promise<string> {
  return (await upsertSubscriptions(tx, { ...input, lines: [input.line] }))[0]!;
}

/** The steps of `subscriptions import`, as `orderImport`'s. */
export function subscriptionImport(
  input: LineWriting,
): ImportSteps<SubscriptionLine, string | null> {
  return lineImport(input, { schema: SubscriptionLineSchema, write: writeSubscriptions });
}
