/**
 * The Deno KV key space: every key the service uses.
 *
 * @module
 */
/**
 * Every Deno KV key the service uses is built here, so the key space is documented in one place
 * and no two modules can collide.
 */

/** A KV key as a string, for maps keyed by KV keys (the service's keys hold strings and numbers). */
export function kvKeyId(key: Deno.KvKey): string {
  return JSON.stringify(key, (_, v) => typeof v === "bigint" ? `${v}n` : v);
}

/** API key record by the SHA-256 hex of the plaintext key. */
export function apiKeyByHashKey(hash: string): Deno.KvKey {
  return ["api_keys", "by_hash", hash];
}

/** Secondary index: key id → hash, for revocation and rotation by id. */
export function apiKeyByIdKey(keyId: string): Deno.KvKey {
  return ["api_keys", "by_id", keyId];
}

/** Secondary index: one brand's keys (value: hash), for listing. */
export function apiKeyByBrandKey(brandId: string, keyId: string): Deno.KvKey {
  return ["api_keys", "by_brand", brandId, keyId];
}

/** Prefix of one brand's key index. */
export function apiKeysOfBrandPrefix(brandId: string): Deno.KvKey {
  return ["api_keys", "by_brand", brandId];
}

/** An opaque pagination cursor. */
export function cursorKey(cursorId: string): Deno.KvKey {
  return ["cursors", cursorId];
}

/** One fixed rate-limit window of one limiter for one subject. */
export function rateLimitKey(limiter: string, subject: string, windowStart: number): Deno.KvKey {
  return ["rate_limits", limiter, subject, windowStart];
}

/**
 * One fixed window of a limiter counted with a commutative KV `sum` (a `Deno.KvU64`), apart from
 * the check-and-set windows of {@linkcode rateLimitKey} whose values are plain numbers.
 */
export function rateCounterKey(limiter: string, subject: string, windowStart: number): Deno.KvKey {
  return ["rate_counters", limiter, subject, windowStart];
}

/** Prefix of one subject's sum-counted windows of one limiter. */
export function rateCountersOfSubjectPrefix(limiter: string, subject: string): Deno.KvKey {
  return ["rate_counters", limiter, subject];
}

/** Bumped after every change to a brand's scope, permission or integration (cache validation). */
export function brandVersionKey(brandId: string): Deno.KvKey {
  return ["brands", "version", brandId];
}

/**
 * Bumped after every change to a shop's storefront integration (created, connected,
 * disconnected, erased): the pixel doors' cache of shops (routes/app.ts) is valid for one version.
 */
export function shopVersionKey(shop: string): Deno.KvKey {
  return ["shops", "version", shop];
}

/** One metered request. */
export function usageRecordKey(brandId: string, day: string, requestId: string): Deno.KvKey {
  return ["usage", "requests", brandId, day, requestId];
}

/** Prefix of one brand's usage records, by day. */
export function usageRecordsOfBrandPrefix(brandId: string): Deno.KvKey {
  return ["usage", "requests", brandId];
}

/** Running request count of one brand, day and route family. */
export function usageDailyKey(brandId: string, day: string, family: string): Deno.KvKey {
  return ["usage", "daily", brandId, day, family];
}

/** Prefix of one brand's daily counters. */
export function usageDailyPrefix(brandId: string): Deno.KvKey {
  return ["usage", "daily", brandId];
}

/** The generated key that encrypts storefront access tokens when none is configured. */
export function tokenEncryptionSecretKey(): Deno.KvKey {
  return ["secrets", "token_encryption_key"];
}

/** A queue message the forwarder gave up on. */
export function deadLetterKey(messageId: string): Deno.KvKey {
  return ["dead_letters", messageId];
}

/** Prefix of every dead letter. */
export function deadLetterPrefix(): Deno.KvKey {
  return ["dead_letters"];
}

/** A cached Admin API product read of one shop: kind `list` (id `<first>:<after>`) or `product`. */
export function productCacheKey(shop: string, kind: "list" | "product", id: string): Deno.KvKey {
  return ["product_cache", shop, kind, id];
}

/**
 * A running total of the ingest backlog (a `Deno.KvU64` changed only by `sum`): `enqueued` events
 * put on the queue, `done` events whose message the forwarder finished. Backlog = the difference.
 */
export function ingestBacklogCounterKey(which: "enqueued" | "done"): Deno.KvKey {
  return ["ingest_backlog", which];
}

/** A queued message not yet counted done (value: its event count), written with its enqueue. */
export function ingestBacklogMarkerKey(messageId: string): Deno.KvKey {
  return ["ingest_backlog", "pending", messageId];
}

/** Written by KV itself when it gives up on a message, so that its marker can be retired. */
export function ingestBacklogUndeliveredKey(messageId: string): Deno.KvKey {
  return ["ingest_backlog", "undelivered", messageId];
}

/** Prefix of every {@linkcode ingestBacklogUndeliveredKey}. */
export function ingestBacklogUndeliveredPrefix(): Deno.KvKey {
  return ["ingest_backlog", "undelivered"];
}

/** A message waiting in the ingest outbox (`INGEST_QUEUE=outbox`), by a time-ordered id. */
export function ingestOutboxKey(entryId: string): Deno.KvKey {
  return ["ingest_outbox", entryId];
}

/** Prefix of every {@linkcode ingestOutboxKey}, oldest first. */
export function ingestOutboxPrefix(): Deno.KvKey {
  return ["ingest_outbox"];
}

/** The state of a brand's latest Shopify history backfill (`shop sync`, `shop status`). */
export function shopSyncStateKey(brandId: string): Deno.KvKey {
  return ["shop_sync", brandId];
}

/** The latest verified Shopify webhook delivery of one shop (dashboard health). */
export function lastWebhookKey(shop: string): Deno.KvKey {
  return ["webhooks", "last", shop];
}

/** Read (never written) by the health checks, to prove the KV database answers. */
export function healthProbeKey(): Deno.KvKey {
  return ["health"];
}

/**
 * The shop a Shopify delivery belongs to, by its `X-Shopify-Webhook-Id` (`id`) or the SHA-256 of
 * its signed body (`body`): the first shop that presents one owns it for the retention, so a
 * captured delivery cannot be replayed into another shop.
 */
export function webhookClaimKey(kind: "id" | "body", value: string): Deno.KvKey {
  return ["webhooks", "claims", kind, value];
}

/** A brand's fitted predictive model and its validation (lib/commerce/predictions/). */
export function predictionsKey(brandId: string): Deno.KvKey {
  return ["predictions", brandId];
}

/** Set while a brand's predictions refit waits in the queue (value: when it was queued). */
export function predictionsFitQueuedKey(brandId: string): Deno.KvKey {
  return ["predictions_fit_queued", brandId];
}

/** A message refused inside an accepted ingest request (lib/ingest/rejected_messages.ts). */
export function rejectedMessageKey(brandId: string, id: string): Deno.KvKey {
  return ["rejected_messages", brandId, id];
}

/** Prefix of a brand's kept refused messages. */
export function rejectedMessagePrefix(brandId: string): Deno.KvKey {
  return ["rejected_messages", brandId];
}

/** How many messages of a brand were refused inside accepted requests (a KV sum). */
export function rejectedCountKey(brandId: string): Deno.KvKey {
  return ["rejected_count", brandId];
}

/** POSTs to a brand's destinations in one minute window (lib/audiences/delivery_rate.ts). */
export function destinationRateKey(brandId: string, minute: number): Deno.KvKey {
  return ["destination_rate", brandId, minute];
}

/** Set while a sweep of the time-driven segments waits or runs (value: when it was queued). */
export function membershipSweepQueuedKey(): Deno.KvKey {
  return ["membership_sweep_queued"];
}

/** The key of the keyed hash of privacy identifiers, when TOKEN_ENCRYPTION_KEY is unset. */
export function privacyHashSecretKey(): Deno.KvKey {
  return ["secrets", "privacy_hash_key"];
}
