/**
 * Shopify webhooks: signature verification and what each topic does.
 *
 * The principal module of lib/shopify/, which owns everything that speaks Shopify: its webhooks
 * (this module), their payloads mapped to commerce lines (order_mapping.ts), the Admin GraphQL
 * client (admin_client.ts), a brand's cached product reads over it (product_reads.ts), and the
 * history backfill through bulk operations (shop_sync.ts over bulk_operation.ts, bulk_jsonl.ts and
 * bulk_mapping.ts; shop_sync_job.ts runs it from the queue).
 *
 * Every effect runs in one transaction with the insert of its `webhook_deliveries` row
 * (`on conflict do nothing`): a repeated `X-Shopify-Webhook-Id` finds the row and is acknowledged
 * without being applied again, and a delivery whose effect fails leaves no row, so Shopify's
 * retry applies it.
 *
 * A delivery belongs to one shop: its webhook id and its signed body are bound in Deno KV to the
 * first shop that presents them, for the retention (the signature covers the body only, so the
 * headers of a captured delivery could otherwise name any shop), and a payload field that names
 * a shop must name the header's.
 *
 * @module
 */
import type { Sql, Tx } from "../store/db.ts";
import { bumpBrandVersion, bumpShopVersion, closeScopeWrites } from "../tenancy/brands.ts";
import { DomainError } from "../errors.ts";
import { webhookClaimKey } from "../store/kv_keys.ts";
import { log, type LogLevel } from "../log.ts";
import {
  contactLockKey,
  normalizeEmail,
  normalizePhone,
  upsertContact,
} from "../commerce/contacts.ts";
import type { OrderLine } from "../commerce/order_lines.ts";
import { upsertOrder } from "../commerce/orders.ts";
import { upsertSubscription } from "../commerce/subscriptions.ts";
import { markInsightsChanged } from "../commerce/summaries.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import type { IdentifierHasher } from "../privacy/identifiers.ts";
import { queueRequest, recordRequest } from "../privacy/requests.ts";
import {
  mapShopifyCustomer,
  mapShopifyOrder,
  mapShopifySubscription,
  type Payload,
  shopifyId,
} from "./order_mapping.ts";

/** Order topics: the payload is an order, mapped and upserted. */
export const ORDER_TOPICS = [
  "orders/create",
  "orders/updated",
  "orders/paid",
  "orders/cancelled",
  "orders/fulfilled",
] as const;
export const CUSTOMER_TOPICS = ["customers/create", "customers/update"] as const;
export const SUBSCRIPTION_TOPICS = [
  "subscription_contracts/create",
  "subscription_contracts/update",
] as const;
/** Topics honoured even once the integration is disconnected (they arrive after uninstall). */
export const LIFECYCLE_TOPICS = [
  "app/uninstalled",
  "customers/redact",
  "customers/data_request",
  "shop/redact",
] as const;

/**
 * How long a delivery's `webhook_deliveries` row is kept for deduplication: Shopify retries a
 * delivery for 48 hours, so a week covers every retry with room to spare.
 */
export const WEBHOOK_DELIVERY_RETENTION_MS = 7 * 86_400_000;
/** Rows pruned per delivery at most, so that no delivery pays for a large backlog at once. */
const _PRUNE_BATCH = 100;

/** Every topic with an effect; any other topic is acknowledged and ignored. */
export const WEBHOOK_TOPICS: readonly string[] = [
  ...ORDER_TOPICS,
  ...CUSTOMER_TOPICS,
  ...SUBSCRIPTION_TOPICS,
  ...LIFECYCLE_TOPICS,
];

/** The HMAC-SHA256 key of the app secret, for {@linkcode verifyShopifyHmac}. */
export async function importWebhookKey(secret: string): Promise<CryptoKey> {
  return await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign", "verify"],
  );
}

/**
 * True when `header` is the base64 HMAC-SHA256 of exactly these body bytes. The comparison is
 * crypto.subtle.verify's, in constant time; a missing or malformed header is just a mismatch.
 */
export async function verifyShopifyHmac(
  key: CryptoKey,
  body: Uint8Array<ArrayBuffer>,
  header: string | undefined,
): Promise<boolean> {
  const signature = _fromBase64(header?.trim() ?? "");
  if (!signature) return false;
  return await crypto.subtle.verify("HMAC", key, signature, body);
}

/** The base64 HMAC-SHA256 of a body, as Shopify sends it (tests and local tooling). */
export async function signShopifyWebhook(
  key: CryptoKey,
  body: Uint8Array<ArrayBuffer>,
): Promise<string> {
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, body));
  return btoa(String.fromCharCode(...mac));
}

function _fromBase64(text: string): Uint8Array<ArrayBuffer> | null {
  if (text.length === 0 || text.length > 128 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return null;
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return null;
  }
}

/** One verified delivery. */
export interface WebhookDelivery {
  topic: string;
  /** Normalized (`*.myshopify.com`, lower case). */
  shop: string;
  webhookId: string;
  payload: Payload;
  /**
   * The hex SHA-256 of the signed body (the route always gives it): bound to the shop with the
   * webhook id, so that the same signed body is never applied to another shop.
   */
  bodyDigest?: string;
}

/** What became of a delivery; every outcome is acknowledged with 200. */
export interface WebhookResult {
  outcome: "applied" | "duplicate" | "stale" | "ignored";
  /** Why an `ignored` delivery was ignored. */
  reason?: "unknown_shop" | "unsupported_topic" | "integration_disconnected" | "no_identifier";
  /** customers/redact and customers/data_request: the privacy request recorded (erase, export). */
  privacy_request_id?: string;
}

/** What {@linkcode applyWebhook} needs. */
export interface WebhookDeps {
  sql: Sql;
  /** Where a disconnect bumps the brand's version, and where deliveries are bound to shops. */
  kv: Deno.Kv;
  now: () => Date;
  newId: () => string;
  /** Where log lines go (customers/data_request); `log` (lib/log.ts) by default. */
  log?: (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;
  /**
   * customers/redact and customers/data_request become privacy requests (erase, export): the
   * identifiers' keyed hash, and the queue they are sent on after the commit (without one, the
   * minutely upkeep queues them).
   */
  privacy: { hasher: () => Promise<IdentifierHasher>; queue?: Pick<IngestQueue, "send"> };
}

type _Effect = (tx: Tx) => Promise<WebhookResult>;

/**
 * Applies a verified delivery. An unknown shop is ignored without a trace (not ours; answering
 * anything but 2xx would only make Shopify retry for 48 hours). A payload that does not map is
 * 400 before anything is written.
 */
export async function applyWebhook(
  deps: WebhookDeps,
  delivery: WebhookDelivery,
): Promise<WebhookResult> {
  const [integration] = await deps.sql<{ brand_id: string; status: string }[]>`
    select brand_id, status from integrations
    where shop_domain = ${delivery.shop} and provider = 'shopify'`;
  if (!integration) return { outcome: "ignored", reason: "unknown_shop" };
  _checkPayloadShop(delivery);
  const connected = integration.status === "connected";
  const hasher = _PRIVACY_TOPICS.has(delivery.topic) ? await deps.privacy.hasher() : null;
  const effect = _effect(deps, delivery, integration.brand_id, connected, hasher);
  await _claimDelivery(deps.kv, delivery);
  const now = deps.now();
  const result = await deps.sql.begin(async (sql) => {
    const tx = sql as unknown as Tx;
    const recorded = await tx`
      insert into webhook_deliveries (shop_domain, webhook_id, topic, received_at)
      values (${delivery.shop}, ${delivery.webhookId}, ${delivery.topic}, ${now})
      on conflict (shop_domain, webhook_id) do nothing
      returning 1`;
    if (recorded.length === 0) return { outcome: "duplicate" } satisfies WebhookResult;
    return await effect(tx);
  });
  if (result.outcome === "applied" && _DISCONNECTING_TOPICS.has(delivery.topic)) {
    await bumpBrandVersion(deps.kv, integration.brand_id);
    await bumpShopVersion(deps.kv, delivery.shop);
  }
  if (result.privacy_request_id && deps.privacy.queue) {
    await queueRequest({ queue: deps.privacy.queue }, {
      brandId: integration.brand_id,
      requestId: result.privacy_request_id,
    });
  }
  await pruneWebhookDeliveries(deps.sql, now);
  return result;
}

/**
 * Deletes up to 100 `webhook_deliveries` rows older than the retention, oldest first; rows
 * another delivery is pruning are skipped rather than waited for. Returns how many it deleted.
 */
export async function pruneWebhookDeliveries(sql: Sql, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - WEBHOOK_DELIVERY_RETENTION_MS);
  const deleted = await sql`
    delete from webhook_deliveries
    where (shop_domain, webhook_id) in (
      select shop_domain, webhook_id from webhook_deliveries
      where received_at < ${cutoff}
      order by received_at
      limit ${_PRUNE_BATCH}
      for update skip locked)`;
  return deleted.count;
}

// Topics whose effect changes the brand's integration (cached by the request pipeline).
const _DISCONNECTING_TOPICS = new Set(["app/uninstalled", "shop/redact"]);
// Topics that record a privacy request.
const _PRIVACY_TOPICS = new Set(["customers/redact", "customers/data_request"]);

/**
 * Privacy and shop payloads name their shop (`shop_domain`, `myshopify_domain`), and an order's
 * `order_status_url` is on the shop's domain: a `*.myshopify.com` there must be the header's (a
 * custom storefront domain cannot be told apart and passes).
 */
function _checkPayloadShop(delivery: WebhookDelivery): void {
  const { payload } = delivery;
  const mismatch = () =>
    new DomainError("invalid_input", "the payload names another shop than the header");
  for (const named of [payload.shop_domain, payload.myshopify_domain]) {
    if (named === undefined || named === null) continue;
    if (typeof named !== "string" || named.trim().toLowerCase() !== delivery.shop) throw mismatch();
  }
  if (typeof payload.order_status_url === "string") {
    const host = URL.parse(payload.order_status_url)?.hostname.toLowerCase();
    if (host?.endsWith(".myshopify.com") && host !== delivery.shop) throw mismatch();
  }
}

/** Claims are re-read this many times when another delivery races for the same keys. */
const _CLAIM_ATTEMPTS = 5;

/**
 * Binds the delivery's webhook id and signed body to its shop, or refuses it (invalid input,
 * nothing changed) when either is bound to another shop already: a webhook id is consumed once
 * globally, and a captured delivery cannot be replayed into another shop under a new id either.
 * Shopify's retries and other topics of the same shop find their own shop and pass.
 */
async function _claimDelivery(kv: Deno.Kv, delivery: WebhookDelivery): Promise<void> {
  const keys = [webhookClaimKey("id", delivery.webhookId)];
  if (delivery.bodyDigest) keys.push(webhookClaimKey("body", delivery.bodyDigest));
  for (let attempt = 0; attempt < _CLAIM_ATTEMPTS; attempt++) {
    const entries = await kv.getMany<string[]>(keys);
    const taken = entries.find((entry) => entry.value !== null && entry.value !== delivery.shop);
    if (taken) {
      throw new DomainError(
        "invalid_input",
        taken.key[2] === "id"
          ? "this X-Shopify-Webhook-Id was delivered for another shop"
          : "this signed body was delivered for another shop",
      );
    }
    const free = entries.filter((entry) => entry.value === null);
    if (free.length === 0) return;
    const claim = kv.atomic();
    for (const entry of free) {
      claim.check(entry).set(entry.key, delivery.shop, {
        expireIn: WEBHOOK_DELIVERY_RETENTION_MS,
      });
    }
    if ((await claim.commit()).ok) return;
  }
  throw new DomainError("unavailable", "the delivery could not be recorded; retry");
}

/** Maps the payload (400 when it does not map) and returns the effect to run. */
function _effect(
  deps: WebhookDeps,
  delivery: WebhookDelivery,
  brandId: string,
  connected: boolean,
  hasher: IdentifierHasher | null,
): _Effect {
  const { topic, payload } = delivery;
  const base = { brandId, newId: deps.newId, now: deps.now() };
  // customers/redact and customers/data_request: a privacy request of the customer.
  const privacyRequest =
    (type: "erase" | "export", person: _ShopifyPerson, orderIds: string[]) =>
    async (tx: Tx): Promise<WebhookResult> => {
      const [identifier, ...extraIdentifiers] = [
        person.shopifyCustomerId,
        person.email,
        person.phone,
      ].filter((id): id is string => id !== null);
      if (!identifier) return { outcome: "ignored", reason: "no_identifier" };
      const id = await recordRequest(
        tx,
        { newId: deps.newId, now: deps.now, hasher: hasher! },
        {
          brandId,
          scope: delivery.shop,
          type,
          identifier,
          extraIdentifiers,
          requestedBy: `shopify:${topic}`,
          details: type === "erase" ? { orderIds } : {},
        },
      );
      return { outcome: "applied", privacy_request_id: id };
    };
  const isDataTopic = !(LIFECYCLE_TOPICS as readonly string[]).includes(topic);
  if (!WEBHOOK_TOPICS.includes(topic)) {
    return () => Promise.resolve({ outcome: "ignored", reason: "unsupported_topic" });
  }
  if (isDataTopic && !connected) {
    // After app/uninstalled (or an operator's disconnect) nothing is synced: a late retry must not
    // bring back data that shop/redact is about to erase.
    return () => Promise.resolve({ outcome: "ignored", reason: "integration_disconnected" });
  }
  if ((ORDER_TOPICS as readonly string[]).includes(topic)) {
    const line = mapShopifyOrder(payload);
    return (tx) => _applyOrder(tx, { ...base, line });
  }
  if ((CUSTOMER_TOPICS as readonly string[]).includes(topic)) {
    const customer = mapShopifyCustomer(payload);
    const updatedAt = _timestamp(payload.updated_at);
    return (tx) => _applyCustomer(tx, { ...base, customer, updatedAt });
  }
  if ((SUBSCRIPTION_TOPICS as readonly string[]).includes(topic)) {
    const line = mapShopifySubscription(payload);
    const revision = shopifyId(payload.revision_id) ?? null;
    return (tx) => _applySubscription(tx, { ...base, line, revision });
  }
  switch (topic) {
    case "app/uninstalled":
      return async (tx) => {
        await _disconnect(tx, brandId, base.now, { clearToken: false });
        return { outcome: "applied" };
      };
    case "customers/redact": {
      const request = _redactRequest(payload);
      return privacyRequest("erase", request, request.orderIds);
    }
    case "customers/data_request": {
      const customer = _object(payload.customer);
      const person = _shopifyPerson(customer ?? {});
      const fields = {
        shop: delivery.shop,
        webhook_id: delivery.webhookId,
        data_request_id: shopifyId(_object(payload.data_request)?.id) ?? null,
        shopify_customer_id: shopifyId(customer?.id) ?? null,
        orders_requested: Array.isArray(payload.orders_requested)
          ? payload.orders_requested.length
          : 0,
      };
      const exportRequest = privacyRequest("export", person, []);
      return (tx) => {
        // The merchant downloads the export from the dashboard; this line is the record of the
        // delivery (no personal data).
        (deps.log ?? log)("info", "shopify customers/data_request", fields);
        return exportRequest(tx);
      };
    }
    case "shop/redact":
      return async (tx) => {
        // First: the writes in flight to the shop finish (and are erased below), later ones are
        // refused, and the brand's keys stop writing until an operator reconnects it.
        await closeScopeWrites(tx, delivery.shop, base.now);
        await tx`delete from orders where brand_id = ${brandId}`;
        await tx`delete from subscriptions where brand_id = ${brandId}`;
        await tx`delete from contacts where brand_id = ${brandId}`;
        await tx`delete from customer_summaries where brand_id = ${brandId}`;
        await tx`delete from product_summaries where brand_id = ${brandId}`;
        await tx`delete from revenue_month_summaries where brand_id = ${brandId}`;
        await tx`delete from rfm_cell_summaries where brand_id = ${brandId}`;
        await tx`delete from insight_snapshots where brand_id = ${brandId}`;
        // The engine's data of the shop (its scope): events, sessions, profiles, aliases,
        // segment definitions and the storefront's stitching claims.
        const scope = delivery.shop;
        await tx`delete from events where scope = ${scope}`;
        await tx`delete from sessions where scope = ${scope}`;
        await tx`delete from profile_aliases where scope = ${scope}`;
        await tx`delete from profiles where scope = ${scope}`;
        await tx`delete from segments where scope = ${scope}`;
        await tx`delete from pixel_claims where scope = ${scope}`;
        // Who was in which segment, and when they entered or left: nobody is told any more.
        await tx`delete from profile_segments where scope = ${scope}`;
        await tx`delete from segment_feed where scope = ${scope}`;
        await tx`delete from destination_deliveries where scope = ${scope}`;
        // The brand's privacy requests hold identifiers, its exports personal data (the audit,
        // keyed hashes only, and the suppressions stay).
        await tx`delete from privacy_requests where brand_id = ${brandId}`;
        await _disconnect(tx, brandId, base.now, { clearToken: true });
        await markInsightsChanged(tx, brandId);
        return { outcome: "applied" };
      };
  }
  return () => Promise.resolve({ outcome: "ignored", reason: "unsupported_topic" });
}

/** Serializes the deliveries that touch one record, so that the stale check holds. */
async function _lock(tx: Tx, key: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
}

async function _applyOrder(
  tx: Tx,
  input: { brandId: string; line: OrderLine; newId: () => string; now: Date },
): Promise<WebhookResult> {
  const { line } = input;
  await _lock(tx, `order|${input.brandId}|${line.external_id}`);
  const [stored] = await tx<
    { updated_at: Date | null; recovered_at: Date | null; customer_redacted_at: Date | null }[]
  >`
    select updated_at, recovered_at, customer_redacted_at from orders
    where brand_id = ${input.brandId} and external_id = ${line.external_id}`;
  if (_older(line.updated_at, stored?.updated_at)) return { outcome: "stale" };
  await upsertOrder(tx, {
    ...input,
    line: {
      ...line,
      // Not in Shopify's payload: keep what an import recorded.
      recovered_at: stored?.recovered_at?.toISOString() ?? line.recovered_at ?? null,
      // A redacted customer is never attached again, whatever a late delivery carries.
      customer: stored?.customer_redacted_at ? null : line.customer,
    },
  });
  return { outcome: "applied" };
}

async function _applyCustomer(
  tx: Tx,
  input: {
    brandId: string;
    customer: ReturnType<typeof mapShopifyCustomer>;
    updatedAt: Date | null;
    newId: () => string;
    now: Date;
  },
): Promise<WebhookResult> {
  const shopifyCustomerId = input.customer.shopify_customer_id;
  await _lock(tx, contactLockKey(input.brandId, shopifyCustomerId));
  const [stored] = await tx<{ source_updated_at: Date | null }[]>`
    select source_updated_at from contacts
    where brand_id = ${input.brandId} and shopify_customer_id = ${shopifyCustomerId}`;
  if (
    input.updatedAt && stored?.source_updated_at &&
    input.updatedAt.getTime() < stored.source_updated_at.getTime()
  ) {
    return { outcome: "stale" };
  }
  const id = await upsertContact(tx, input);
  if (!id) return { outcome: "ignored", reason: "no_identifier" };
  if (input.updatedAt) {
    await tx`update contacts set source_updated_at = ${input.updatedAt} where id = ${id}`;
  }
  return { outcome: "applied" };
}

async function _applySubscription(
  tx: Tx,
  input: {
    brandId: string;
    line: ReturnType<typeof mapShopifySubscription>;
    revision: string | null;
    newId: () => string;
    now: Date;
  },
): Promise<WebhookResult> {
  const { line, revision } = input;
  await _lock(tx, `subscription|${input.brandId}|${line.external_id}`);
  const [stored] = await tx<{ source_revision: string | null }[]>`
    select source_revision::text as source_revision from subscriptions
    where brand_id = ${input.brandId} and external_id = ${line.external_id}`;
  if (revision && stored?.source_revision && BigInt(revision) < BigInt(stored.source_revision)) {
    return { outcome: "stale" };
  }
  await upsertSubscription(tx, input);
  if (revision) {
    await tx`update subscriptions set source_revision = ${revision}::numeric
             where brand_id = ${input.brandId} and external_id = ${line.external_id}`;
  }
  return { outcome: "applied" };
}

/** Disconnects the brand's integration; the shop stays its scope. */
async function _disconnect(
  tx: Tx,
  brandId: string,
  now: Date,
  options: { clearToken: boolean },
): Promise<void> {
  await tx`
    update integrations
    set status = 'disconnected', updated_at = ${now},
        access_token_ciphertext = case when ${options.clearToken} then null
                                       else access_token_ciphertext end
    where brand_id = ${brandId} and provider = 'shopify'`;
}

interface _ShopifyPerson {
  shopifyCustomerId: string | null;
  email: string | null;
  phone: string | null;
}

function _shopifyPerson(customer: Payload): _ShopifyPerson {
  return {
    shopifyCustomerId: shopifyId(customer.id) ?? null,
    email: normalizeEmail(typeof customer.email === "string" ? customer.email : null),
    phone: normalizePhone(typeof customer.phone === "string" ? customer.phone : null),
  };
}

function _redactRequest(payload: Payload): _ShopifyPerson & { orderIds: string[] } {
  const customer = _object(payload.customer);
  const orders = payload.orders_to_redact ?? [];
  if (!customer || !Array.isArray(orders)) {
    throw new DomainError(
      "invalid_input",
      "payload does not map: customers/redact needs customer and orders_to_redact",
    );
  }
  return {
    ..._shopifyPerson(customer),
    orderIds: orders.map((id) => shopifyId(id)).filter((id): id is string => id !== undefined),
  };
}

/** True when `incoming` is strictly older than `stored` (both present). */
function _older(incoming: string | null | undefined, stored: Date | null | undefined): boolean {
  if (!incoming || !stored) return false;
  return Date.parse(incoming) < stored.getTime();
}

function _timestamp(value: unknown): Date | null {
  if (typeof value !== "string") return null;
  const time = Date.parse(value);
  return Number.isNaN(time) ? null : new Date(time);
}

function _object(value: unknown): Payload | null {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? value as Payload
    : null;
}
