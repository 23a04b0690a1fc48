/**
 * Verified stitching: a storefront visitor (a pixel profile, the pixel's `clientId`) is linked to
 * the Shopify customer who placed an order only when an order that came from Shopify itself
 * confirms what the browser claimed.
 *
 * The pixel door records a `checkout_completed`'s claim ("client C placed order N", with the
 * checkout's email) as pending (`recordPixelClaims`). The claim is confirmed by the order N in
 * the synced store (`orders`: written only by HMAC-verified webhooks, the backfill and the
 * operator's import, never by a browser) whichever arrives first: the door sends a
 * `pixel_stitch` job at once when the order is already there, the order webhook sends one when a
 * claim waits for it (`queueStitchIfClaimed`). The job (`stitchOrderClaims`, run by the
 * forwarder, idempotent) merges the visitor's profile into the customer's server profile in one
 * transaction; a claim whose visitor has no events stored yet makes the job throw, so the queue
 * retries it later. A claim nothing confirms within {@linkcode PIXEL_CLAIM_WAIT_MS} expires
 * and is pruned; it never merged anything.
 *
 * @module
 */
import { jsonParam, type Sql, type Tx } from "../store/db.ts";
import { scopeWritesClosed } from "../tenancy/brands.ts";
import { mergeProfiles } from "../engine/apply_events.ts";
import { DomainError } from "../errors.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import type { PixelClaim } from "../ingest/shopify_pixel_spec.ts";

/**
 * How long a claim waits for its order: longer than Shopify retries a webhook (48 hours), so the
 * order's own delivery always finds it.
 */
export const PIXEL_CLAIM_WAIT_MS = 72 * 3_600_000;
/** Retry delays of a stitch job whose visitor's events are not stored yet. */
export const PIXEL_STITCH_RETRY_MS = [1_000, 5_000, 30_000, 120_000, 600_000];
/** Expired or resolved claims pruned per recording at most. */
const _PRUNE_BATCH = 100;
/** How long a resolved claim is kept, as the record of what was linked and why. */
const _RESOLVED_RETENTION_MS = 30 * 86_400_000;

/** The queue message of a stitch: confirm the claims on one order of one scope. */
export interface PixelStitchMessage {
  kind: "pixel_stitch";
  scope: string;
  orderId: string;
}

/** Whether a queue message is a stitch job. */
export function isPixelStitchMessage(message: unknown): message is PixelStitchMessage {
  const m = message as Partial<PixelStitchMessage> | null;
  return m?.kind === "pixel_stitch" && typeof m.scope === "string" &&
    typeof m.orderId === "string";
}

/**
 * Records claims as pending (a claim sent again is recorded once) and prunes a bounded batch of
 * expired and old resolved ones. Returns the claimed order ids already in the brand's store.
 */
export async function recordPixelClaims(
  sql: Sql,
  brand: { brandId: string; scope: string },
  claims: PixelClaim[],
  now: Date,
): Promise<string[]> {
  if (claims.length === 0) return [];
  const expires = new Date(now.getTime() + PIXEL_CLAIM_WAIT_MS);
  const rows = claims.map((c) => ({ order_id: c.orderId, client_id: c.clientId, email: c.email }));
  await sql`
    insert into pixel_claims (scope, order_id, client_id, email, claimed_at, expires_at)
    select ${brand.scope}, x.order_id, x.client_id, x.email, ${now}, ${expires}
    from jsonb_to_recordset(${jsonParam(sql, rows)}::jsonb) as x(
      order_id text, client_id text, email text)
    on conflict (scope, order_id, client_id) do nothing`;
  const resolvedBefore = new Date(now.getTime() - _RESOLVED_RETENTION_MS);
  await sql`
    delete from pixel_claims
    where (scope, order_id, client_id) in (
      select scope, order_id, client_id from pixel_claims
      where (status = 'pending' and expires_at < ${now})
         or (status <> 'pending' and resolved_at < ${resolvedBefore})
      limit ${_PRUNE_BATCH}
      for update skip locked)`;
  const found = await sql<{ external_id: string }[]>`
    select external_id from orders
    where brand_id = ${brand.brandId}
      and external_id = any(${[...new Set(claims.map((c) => c.orderId))]}::text[])`;
  return found.map((r) => r.external_id);
}

/** Sends the stitch job of an order (its claims are confirmed or refused by the job). */
export async function queueStitch(
  queue: Pick<IngestQueue, "send">,
  scope: string,
  orderId: string,
): Promise<void> {
  const message: PixelStitchMessage = { kind: "pixel_stitch", scope, orderId };
  if (!await queue.send(message, { backoffSchedule: PIXEL_STITCH_RETRY_MS })) {
    throw new DomainError("unavailable", "the stitch job could not be queued; retry");
  }
}

/** Sends the stitch job of an order that arrived from Shopify when a pending claim waits for it. */
export async function queueStitchIfClaimed(
  deps: { sql: Sql; queue: Pick<IngestQueue, "send">; now: () => Date },
  scope: string,
  orderId: string | undefined,
): Promise<boolean> {
  if (!orderId) return false;
  const [claimed] = await deps.sql`
    select 1 from pixel_claims
    where scope = ${scope} and order_id = ${orderId} and status = 'pending'
      and expires_at > ${deps.now()}
    limit 1`;
  if (!claimed) return false;
  await queueStitch(deps.queue, scope, orderId);
  return true;
}

/** What one stitch did with the claims on an order. */
export interface StitchResult {
  /** Client ids merged into the customer's profile (`profileId`). */
  merged: string[];
  /** Client ids refused, with the reason; they never merge. */
  refused: { clientId: string; reason: string }[];
  /** Client ids whose events are not stored yet: the job is retried. */
  waiting: string[];
  /** The customer's profile (null when the order is not in the store or has no customer). */
  profileId: string | null;
}

/**
 * Confirms the pending claims on an order against the order Shopify sent: a claim whose checkout
 * email differs from the order's customer's is refused, as is one whose order has no customer or
 * whose visitor is no pixel profile; the others' profiles merge into the customer's server
 * profile (found by the customer's Shopify id, then email; created when there is none).
 * Without the order in the store nothing changes (the claims wait).
 */
export async function stitchOrderClaims(
  deps: { sql: Sql; now: () => Date },
  scope: string,
  orderId: string,
): Promise<StitchResult> {
  const now = deps.now();
  const result: StitchResult = { merged: [], refused: [], waiting: [], profileId: null };
  await deps.sql.begin(async (sql) => {
    const tx = sql as unknown as Tx;
    if (await scopeWritesClosed(tx, scope)) return;
    await tx`select pg_advisory_xact_lock(hashtextextended(${`pixel-claims|${scope}|${orderId}`}, 0))`;
    const claims = await tx<{ client_id: string; email: string | null }[]>`
      select client_id, email from pixel_claims
      where scope = ${scope} and order_id = ${orderId} and status = 'pending'
        and expires_at > ${now}
      order by claimed_at, client_id`;
    if (claims.length === 0) return;
    const [order] = await tx<_OrderCustomer[]>`
      select c.id as contact_id, c.email, c.shopify_customer_id, c.first_name, c.last_name
      from orders o
      join integrations i on i.brand_id = o.brand_id and i.shop_domain = ${scope}
      left join contacts c on c.id = o.contact_id
      where o.external_id = ${orderId}`;
    if (!order) return;
    const refuse = async (clientId: string, reason: string) => {
      result.refused.push({ clientId, reason });
      await tx`
        update pixel_claims set status = 'refused', reason = ${reason}, resolved_at = ${now}
        where scope = ${scope} and order_id = ${orderId} and client_id = ${clientId}`;
    };
    for (const claim of claims) {
      if (!order.contact_id || (!order.email && !order.shopify_customer_id)) {
        await refuse(claim.client_id, "order_without_customer");
        continue;
      }
      if (claim.email && order.email && claim.email !== order.email.toLowerCase()) {
        await refuse(claim.client_id, "email_mismatch");
        continue;
      }
      const visitor = await _visitor(tx, scope, claim.client_id);
      if (visitor === "missing") {
        result.waiting.push(claim.client_id);
        continue;
      }
      result.profileId ??= await _customerProfile(tx, scope, order, now);
      if (visitor !== "pixel" && visitor !== result.profileId) {
        await refuse(claim.client_id, "visitor_not_anonymous");
        continue;
      }
      if (visitor === "pixel") {
        await mergeProfiles(tx, scope, result.profileId, claim.client_id, now);
      }
      result.merged.push(claim.client_id);
      await tx`
        update pixel_claims
        set status = 'merged', profile_id = ${result.profileId}, resolved_at = ${now}
        where scope = ${scope} and order_id = ${orderId} and client_id = ${claim.client_id}`;
    }
  });
  return result;
}

/**
 * The `pixel_stitch` job's handler. A visitor whose events are not stored yet (its batch still
 * in the queue) makes it throw: the queue delivers it again on {@linkcode PIXEL_STITCH_RETRY_MS}.
 */
export function createPixelStitchJob(
  deps: { sql: Sql; now: () => Date },
): (message: unknown) => Promise<void> {
  return async (message) => {
    if (!isPixelStitchMessage(message)) return;
    const result = await stitchOrderClaims(deps, message.scope, message.orderId);
    if (result.waiting.length > 0) {
      throw new Error(`${result.waiting.length} visitor(s) of a claim have no events stored yet`);
    }
  };
}

interface _OrderCustomer {
  contact_id: string | null;
  email: string | null;
  shopify_customer_id: string | null;
  first_name: string | null;
  last_name: string | null;
}

/** The visitor's profile: `pixel`, the profile it was merged into, or `missing`. */
async function _visitor(tx: Tx, scope: string, clientId: string): Promise<string> {
  const [alias] = await tx<{ profile_id: string }[]>`
    select profile_id from profile_aliases where scope = ${scope} and alias_id = ${clientId}`;
  if (alias) return alias.profile_id;
  const [profile] = await tx<{ provenance: string }[]>`
    select provenance from profiles where scope = ${scope} and item_id = ${clientId}`;
  if (!profile) return "missing";
  return profile.provenance === "pixel" ? "pixel" : clientId;
}

/**
 * The customer's server profile: the identified profile carrying the customer's Shopify id, else
 * the customer's email (what GET /cdp/customers resolves them by); else a new server profile
 * `store_<Shopify customer id>` (`store_email_<digest>` without one) with that identity.
 */
async function _customerProfile(
  tx: Tx,
  scope: string,
  order: _OrderCustomer,
  now: Date,
): Promise<string> {
  const byId = order.shopify_customer_id
    ? await tx<{ item_id: string }[]>`
      select item_id from profiles
      where scope = ${scope} and provenance <> 'pixel'
        and lower(properties ->> 'shopifyCustomerId') = lower(${order.shopify_customer_id})
      order by created_at, item_id limit 1`
    : [];
  const byEmail = !byId[0] && order.email
    ? await tx<{ item_id: string }[]>`
      select item_id from profiles
      where scope = ${scope} and provenance <> 'pixel'
        and lower(properties ->> 'email') = lower(${order.email})
      order by created_at, item_id limit 1`
    : [];
  const found = byId[0] ?? byEmail[0];
  if (found) return found.item_id;
  const id = order.shopify_customer_id
    ? `store_${order.shopify_customer_id}`
    : `store_email_${await _digest(order.email!.toLowerCase())}`;
  const properties = Object.fromEntries(
    Object.entries({
      shopDomain: scope,
      email: order.email,
      shopifyCustomerId: order.shopify_customer_id,
      firstName: order.first_name,
      lastName: order.last_name,
    }).filter(([, v]) => v !== null),
  );
  await tx`
    insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
    values (${scope}, ${id}, ${jsonParam(tx, properties)}::jsonb, 'server', ${now}, ${now})
    on conflict (scope, item_id) do nothing`;
  return id;
}

async function _digest(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest).slice(0, 12), (b) => b.toString(16).padStart(2, "0"))
    .join("");
}

/**
 * Erases the storefront claims of a person (lib/privacy's erase, in its transaction): those made
 * by one of their ids or resolved to one, and those naming their email or one of their orders.
 */
export async function erasePixelClaims(
  tx: Tx,
  person: { scope: string; profileIds: readonly string[]; emails?: readonly string[] },
): Promise<Record<string, number>> {
  const ids = [...person.profileIds];
  const emails = (person.emails ?? []).map((email) => email.toLowerCase());
  const deleted = await tx`
    delete from pixel_claims
    where scope = ${person.scope}
      and (client_id = any(${ids}::text[]) or profile_id = any(${ids}::text[])
        or email = any(${emails}::text[]))`;
  return { claims: deleted.count };
}
