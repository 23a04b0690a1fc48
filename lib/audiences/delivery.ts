/**
 * Delivering segment changes to webhook destinations (docs/audiences.md#delivery). Each
 * destination reads the `segment_changes` of its segments after its own cursor, in log order, and
 * makes them into deliveries of at most {@linkcode MAX_BATCH} (a row of
 * `destination_deliveries` holding the exact body, written with the cursor's move in one
 * transaction). A destination has one delivery in flight at a time, oldest first, so changes
 * reach it in log order (per profile in particular); a failed delivery holds the ones after it
 * until it succeeds or, past the retry window, is dead-lettered. Everything lives in PostgreSQL:
 * a process killed between a POST and its record sends that delivery again, with the same ids
 * (at least once). Processes take turns per destination through a lease on its row. The signing
 * secrets (the current one, and a rotated-out one during its overlap) are opened from their sealed
 * row (destination_secret.ts) only when a POST is to be signed.
 *
 * @module
 */
import type { DestinationSettings } from "../config.ts";
import { identityOf } from "../engine/profiles.ts";
import { consentGrantedSql } from "../privacy/consent.ts";
import { DomainError } from "../errors.ts";
import { log } from "../log.ts";
import type { Sql } from "../store/db.ts";
import type { TokenCipher } from "../tenancy/token_cipher.ts";
import {
  type OpenedSecrets,
  openSigningSecrets,
  type StoredSecrets,
} from "./destination_secret.ts";
import { assertDeliverable, type Resolver } from "./destination_url.ts";
import { takeDeliverySlot } from "./delivery_rate.ts";
import { signatureHeader } from "./webhook_signature.ts";

/** Changes one POST carries at most. */
export const MAX_BATCH = 100;

/** POSTs one destination makes in a pass before the others get their turn. */
const _POSTS_PER_PASS = 20;

/** Destinations delivered to at once by one process. */
const _PARALLEL = 8;

/** The longest wait between two attempts of a delivery. */
const _MAX_BACKOFF_MS = 3_600_000;

/** What delivering needs. */
export interface DeliveryDeps {
  sql: Sql;
  kv: Deno.Kv;
  now: () => Date;
  newId: () => string;
  settings: DestinationSettings;
  /** Opens the sealed signing secrets (and seals a plaintext one met on the way). */
  cipher: TokenCipher;
  /** Host name resolution for the address check (DNS by default). */
  resolve?: Resolver;
}

/** `secret` as stored: sealed, or the plaintext of a row written before secrets were sealed. */
interface _Destination extends StoredSecrets {
  brand_id: string;
  scope: string;
  url: string;
  segments: string[];
  cursor: string;
}

interface _Delivery {
  id: string;
  payload: string;
  attempts: number;
  next_attempt_at: Date;
  retry_until: Date;
}

/** What one POST came to. */
export interface AttemptOutcome {
  ok: boolean;
  status: number | null;
  error: string | null;
}

/**
 * One pass over every destination with work due (new changes, or a retry whose time came), each
 * by whichever process takes its lease; answers the POSTs made.
 */
export async function deliverDue(deps: DeliveryDeps): Promise<number> {
  const now = deps.now();
  const due = await deps.sql<{ id: string }[]>`
    select d.id from destinations d
    where (d.lease_until is null or d.lease_until < ${now})
      and (exists (
          select 1 from destination_deliveries x
          where x.destination_id = d.id and x.status = 'pending' and x.next_attempt_at <= ${now})
        or (not exists (
            select 1 from destination_deliveries x
            where x.destination_id = d.id and x.status = 'pending')
          and exists (
            select 1 from segment_changes c
            where c.scope = d.scope and c.segment_id = any(d.segments)
              and c.feed_seq >= segment_feed_seq(d.cursor) and c.position > d.cursor)))`;
  let posts = 0;
  const queue = due.map((row) => row.id);
  await Promise.all(
    Array.from({ length: Math.min(_PARALLEL, queue.length) }, async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        posts += await deliverDestination(deps, id);
      }
    }),
  );
  return posts;
}

/**
 * Delivers what is due for one destination under its lease: the oldest pending delivery, or the
 * next batch of changes, until one fails, nothing is due or the pass's share is used. Answers the
 * POSTs made (0 when another process holds the lease).
 */
export async function deliverDestination(deps: DeliveryDeps, id: string): Promise<number> {
  let lease = _leaseEnd(deps);
  const [destination] = await deps.sql<_Destination[]>`
    update destinations set lease_until = ${lease}
    where id = ${id} and (lease_until is null or lease_until < ${deps.now()})
    returning id, brand_id, scope, url, secret, previous_secret, previous_secret_expires_at,
      segments, cursor`;
  if (!destination) return 0;
  let posts = 0;
  let secrets: OpenedSecrets | null = null;
  try {
    while (posts < _POSTS_PER_PASS) {
      const delivery = await _head(deps.sql, id) ?? await _nextBatch(deps, destination);
      if (!delivery || delivery.next_attempt_at > deps.now()) break;
      secrets ??= await openSigningSecrets(deps, destination, deps.now());
      if (!secrets.ok) {
        // An attempt that failed: retried with backoff (the key may come back), then dead.
        log("warn", "destination delivery not signed", {
          destination: id,
          delivery: delivery.id,
          error: secrets.error,
        });
        await _record(deps, delivery, { ok: false, status: null, error: secrets.error });
        break;
      }
      const now = deps.now();
      if (
        !await takeDeliverySlot(deps.kv, destination.brand_id, now, deps.settings.ratePerMinute)
      ) {
        break;
      }
      // Renewed before each POST, so a slow receiver cannot outlast it.
      const renewed = _leaseEnd(deps);
      const held = await deps.sql`
        update destinations set lease_until = ${renewed} where id = ${id} and lease_until = ${lease}`;
      if (held.count === 0) break;
      lease = renewed;
      posts++;
      const outcome = await postDelivery(
        deps,
        { url: destination.url, secrets: secrets.secrets },
        delivery.id,
        delivery.payload,
      );
      await _record(deps, delivery, outcome);
      if (!outcome.ok) break;
    }
  } finally {
    await deps.sql`
      update destinations set lease_until = null where id = ${id} and lease_until = ${lease}`
      .catch(() => {/* the lease runs out by itself */});
  }
  return posts;
}

function _leaseEnd(deps: DeliveryDeps): Date {
  return new Date(deps.now().getTime() + deps.settings.timeoutMs * 2 + 5_000);
}

async function _head(sql: Sql, destinationId: string): Promise<_Delivery | null> {
  const [row] = await sql<_Delivery[]>`
    select id, payload, attempts, next_attempt_at, retry_until from destination_deliveries
    where destination_id = ${destinationId} and status = 'pending'
    order by first_position limit 1`;
  return row ?? null;
}

/**
 * Makes the next changes after the cursor into a pending delivery, moving the cursor past them.
 * A destination that requires a consent type gets only the changes of profiles with it granted
 * now; the others are passed over (the cursor moves past them), never delivered later.
 */
async function _nextBatch(
  deps: DeliveryDeps,
  destination: _Destination,
): Promise<_Delivery | null> {
  return await deps.sql.begin(async (tx) => {
    const [current] = await tx<
      { cursor: string; segments: string[]; required_consent: string | null }[]
    >`
      select cursor, segments, required_consent from destinations
      where id = ${destination.id} for update`;
    if (!current) return null;
    const now = deps.now();
    const consented = current.required_consent === null
      ? tx`true`
      : consentGrantedSql(tx, current.required_consent, now);
    for (let cursor = current.cursor;;) {
      const scanned = await tx<(_Change & { consented: boolean })[]>`
        select c.position, c.id, c.segment_id, c.profile_id, c.change, c.at,
          s.name as segment_name, p.properties, coalesce(${consented}, false) as consented
        from segment_changes c
        left join segments s on s.scope = c.scope and s.id = c.segment_id
        left join profiles p on p.scope = c.scope and p.item_id = c.profile_id
        where c.scope = ${destination.scope} and c.segment_id = any(${current.segments}::text[])
          and c.feed_seq >= segment_feed_seq(${cursor}::bigint) and c.position > ${cursor}::bigint
        order by c.feed_seq, c.position limit ${MAX_BATCH}`;
      if (scanned.length === 0) return null;
      const last = scanned.at(-1)!.position;
      await tx`update destinations set cursor = ${last} where id = ${destination.id}`;
      const changes = scanned.filter((c) => c.consented);
      if (changes.length === 0) {
        cursor = last;
        continue;
      }
      const id = `dlv_${deps.newId()}`;
      const payload = JSON.stringify({
        destination: destination.id,
        deliveries: changes.map((c) => ({
          id: c.id,
          type: `segment.${c.change}`,
          segment: { id: c.segment_id, name: c.segment_name ?? c.segment_id },
          profile: { id: c.profile_id, identity: c.properties ? identityOf(c.properties) : {} },
          at: new Date(c.at).toISOString(),
        })),
      });
      const retryUntil = new Date(now.getTime() + deps.settings.retryMs);
      const [from, to] = [changes[0]!.position, changes.at(-1)!.position];
      await tx`
        insert into destination_deliveries (id, destination_id, scope, payload, count,
          first_position, last_position, status, created_at, next_attempt_at, retry_until)
        values (${id}, ${destination.id}, ${destination.scope}, ${payload}, ${changes.length},
          ${from}, ${to}, 'pending', ${now}, ${now}, ${retryUntil})`;
      return { id, payload, attempts: 0, next_attempt_at: now, retry_until: retryUntil };
    }
  });
}

interface _Change {
  position: string;
  id: string;
  segment_id: string;
  profile_id: string;
  change: "entered" | "exited";
  at: Date;
  segment_name: string | null;
  properties: Record<string, unknown> | null;
}

/**
 * One POST of `payload` to the destination, signed with each of its (opened) secrets, after the
 * address check; 2xx is success, anything else (a redirect included: none is followed) or no
 * answer in time a failure.
 */
export async function postDelivery(
  deps: Pick<DeliveryDeps, "now" | "settings" | "resolve">,
  destination: { url: string; secrets: readonly string[] },
  deliveryId: string,
  payload: string,
): Promise<AttemptOutcome> {
  try {
    await assertDeliverable(destination.url, deps.settings.allowPrivate, deps.resolve);
    const response = await fetch(destination.url, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "User-Agent": "cdp-destinations/1",
        "X-CDP-Delivery-Id": deliveryId,
        "X-CDP-Signature": await signatureHeader(destination.secrets, payload, deps.now()),
      },
      body: payload,
      redirect: "manual",
      signal: AbortSignal.timeout(deps.settings.timeoutMs),
    });
    await response.body?.cancel();
    if (response.status >= 200 && response.status < 300) {
      return { ok: true, status: response.status, error: null };
    }
    const redirect = response.status >= 300 && response.status < 400;
    return {
      ok: false,
      status: response.status,
      error: `HTTP ${response.status}${redirect ? " (redirects are not followed)" : ""}`,
    };
  } catch (err) {
    const timedOut = err instanceof DOMException && err.name === "TimeoutError";
    return {
      ok: false,
      status: null,
      error: timedOut
        ? `no answer within ${deps.settings.timeoutMs} ms`
        : String(err instanceof Error ? err.message : err).slice(0, 500),
    };
  }
}

async function _record(deps: DeliveryDeps, delivery: _Delivery, outcome: AttemptOutcome) {
  const now = deps.now();
  if (outcome.ok) {
    await deps.sql`
      update destination_deliveries set status = 'delivered', attempts = attempts + 1,
        last_status = ${outcome.status}, last_error = null, completed_at = ${now}
      where id = ${delivery.id} and status = 'pending'`;
    return;
  }
  const backoff = Math.min(deps.settings.backoffMs * 2 ** delivery.attempts, _MAX_BACKOFF_MS);
  const next = new Date(now.getTime() + backoff);
  const dead = next > delivery.retry_until;
  await deps.sql`
    update destination_deliveries set attempts = attempts + 1, last_status = ${outcome.status},
      last_error = ${outcome.error}, next_attempt_at = ${next},
      status = ${dead ? "dead" : "pending"}, completed_at = ${dead ? now : null}
    where id = ${delivery.id} and status = 'pending'`;
  if (dead) {
    log("warn", "destination delivery dead-lettered", {
      delivery: delivery.id,
      error: outcome.error,
    });
  }
}

/**
 * Sends the brand's destination a signed test POST, `{destination, test: true, deliveries: []}`,
 * at once (counted against the brand's delivery rate; `throttled` past it) and answers how it
 * went; nothing is recorded or retried. A secret that cannot be opened is a failed outcome with
 * no POST. Null when the destination is not the scope's.
 */
export async function sendTestDelivery(
  deps: DeliveryDeps,
  scope: string,
  id: string,
): Promise<(AttemptOutcome & { deliveryId: string; durationMs: number }) | null> {
  const [destination] = await deps.sql<_Destination[]>`
    select id, brand_id, scope, url, secret, previous_secret, previous_secret_expires_at,
      segments, cursor
    from destinations where scope = ${scope} and id = ${id}`;
  if (!destination) return null;
  const deliveryId = `test_${deps.newId()}`;
  const now = deps.now();
  const secrets = await openSigningSecrets(deps, destination, now);
  if (!secrets.ok) {
    return { ok: false, status: null, error: secrets.error, deliveryId, durationMs: 0 };
  }
  if (!await takeDeliverySlot(deps.kv, destination.brand_id, now, deps.settings.ratePerMinute)) {
    throw new DomainError(
      "throttled",
      `deliveries of this brand are over ${deps.settings.ratePerMinute} a minute ` +
        "(DESTINATION_RATE_LIMIT_PER_MINUTE); retry in the next minute",
      { retryAfterSeconds: 60 - now.getUTCSeconds() },
    );
  }
  const payload = JSON.stringify({ destination: id, test: true, deliveries: [] });
  const started = performance.now();
  const outcome = await postDelivery(
    deps,
    { url: destination.url, secrets: secrets.secrets },
    deliveryId,
    payload,
  );
  return { ...outcome, deliveryId, durationMs: Math.round(performance.now() - started) };
}
