/**
 * Fixed-window rate limits on Deno KV, per key and policy, with the `RateLimit-*` headers.
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "./app_env.ts";
import { type ErrorCode, HttpError } from "./errors.ts";
import {
  kvKeyId,
  rateCounterKey,
  rateCountersOfSubjectPrefix,
  rateLimitKey,
} from "../store/kv_keys.ts";

/** The outcome of counting one hit against a fixed window. */
export interface RateLimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets (at least 1). */
  retryAfterSeconds: number;
}

/** One limiter: `limit` hits per `windowMs` per subject. */
export interface RateLimitPolicy {
  name: string;
  limit: number;
  windowMs: number;
  /**
   * `exact` (default): an atomic check-and-set, never over the limit, retried under contention.
   * `sum`: admit from a plain read, count with a commutative KV `sum` (never retried); requests
   * in flight when the window fills may pass, so a window admits at most `limit` plus the
   * number of requests of that subject in flight at that moment.
   */
  counting?: "exact" | "sum";
}

/** Where a `sum`-counted window of `policy` for `subject` lives at `now`. */
export function rateCounterWindow(
  policy: RateLimitPolicy,
  subject: string,
  now: Date,
): { key: Deno.KvKey; windowStart: number; retryAfterSeconds: number } {
  const windowStart = Math.floor(now.getTime() / policy.windowMs) * policy.windowMs;
  return {
    key: rateCounterKey(policy.name, subject, windowStart),
    windowStart,
    retryAfterSeconds: Math.max(
      1,
      Math.ceil((windowStart + policy.windowMs - now.getTime()) / 1000),
    ),
  };
}

/**
 * Decides a hit of a `sum`-counted policy from the window's current count, without writing.
 * When allowed, `count(op)` adds the hit to an atomic operation the caller commits (with the
 * request's other writes). `sum` clears a key's expiry, so the first hit seen in a window also
 * deletes the subject's older windows: what stays is the last window of a quiet subject.
 */
export async function admitBySum(
  kv: Deno.Kv,
  policy: RateLimitPolicy,
  subject: string,
  now: Date,
  prefetched?: Deno.KvEntryMaybe<unknown>,
): Promise<RateLimitResult & { count: (op: Deno.AtomicOperation) => void }> {
  const { key, retryAfterSeconds } = rateCounterWindow(policy, subject, now);
  const entry = prefetched ?? await kv.get(key);
  const value = entry.value instanceof Deno.KvU64 ? Number(entry.value.value) : 0;
  const stale: Deno.KvKey[] = [];
  if (entry.versionstamp === null) {
    const prefix = rateCountersOfSubjectPrefix(policy.name, subject);
    for await (const old of kv.list({ prefix, end: key })) stale.push(old.key);
  }
  const allowed = value < policy.limit;
  return {
    allowed,
    limit: policy.limit,
    remaining: allowed ? policy.limit - value - 1 : 0,
    retryAfterSeconds,
    count(op) {
      op.sum(key, 1n);
      for (const old of stale) op.delete(old);
    },
  };
}

/**
 * Counts a hit for `subject` in the current fixed window. The read-check-write is one atomic
 * KV operation (retried on contention), so the limit holds across processes and isolates.
 */
export async function hitRateLimit(
  kv: Deno.Kv,
  policy: RateLimitPolicy,
  subject: string,
  now: Date,
): Promise<RateLimitResult> {
  const windowStart = Math.floor(now.getTime() / policy.windowMs) * policy.windowMs;
  const key = rateLimitKey(policy.name, subject, windowStart);
  const retryAfterSeconds = Math.max(
    1,
    Math.ceil((windowStart + policy.windowMs - now.getTime()) / 1000),
  );
  // A failed check means another hit was counted, and a window counts at most `limit` hits, so
  // `limit + 1` attempts always end in a verdict: contention alone never refuses a hit.
  for (let attempt = 0; attempt <= policy.limit; attempt++) {
    const entry = await kv.get<number>(key);
    const count = entry.value ?? 0;
    if (count >= policy.limit) {
      return { allowed: false, limit: policy.limit, remaining: 0, retryAfterSeconds };
    }
    const result = await kv.atomic().check(entry)
      .set(key, count + 1, { expireIn: policy.windowMs + 60_000 })
      .commit();
    if (result.ok) {
      return {
        allowed: true,
        limit: policy.limit,
        remaining: policy.limit - count - 1,
        retryAfterSeconds,
      };
    }
  }
  // Unreachable while only hitRateLimit writes the key; refusing is the safe answer.
  return { allowed: false, limit: policy.limit, remaining: 0, retryAfterSeconds };
}

/**
 * Middleware factory: throttles by `subject(c)` (skipped when it returns null), sets the IETF
 * `RateLimit-*` headers, and answers 429 with `Retry-After` past the limit. A `sum`-counted hit
 * joins the usage meter's one KV commit when there is one (else it commits at once), and reads
 * its window from `c.var.kvPrefetch` when authentication read it ahead.
 */
export function rateLimit(options: {
  kv: Deno.Kv;
  now: () => Date;
  policy: RateLimitPolicy;
  subject: (c: Context<AppEnv>) => string | null;
  code?: ErrorCode;
}): MiddlewareHandler<AppEnv> {
  return async function rateLimitMiddleware(c, next) {
    const subject = options.subject(c);
    if (subject === null) return await next();
    const result = await _hit(c, options, subject);
    const headers = {
      "RateLimit-Limit": String(result.limit),
      "RateLimit-Remaining": String(result.remaining),
      "RateLimit-Reset": String(result.retryAfterSeconds),
    };
    if (!result.allowed) {
      throw new HttpError(
        429,
        options.code ?? "rate_limited",
        `Rate limit of ${result.limit} requests per ${
          options.policy.windowMs / 1000
        }s exceeded; retry after ${result.retryAfterSeconds}s`,
        { headers: { ...headers, "Retry-After": String(result.retryAfterSeconds) } },
      );
    }
    await next();
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  };
}

async function _hit(
  c: Context<AppEnv>,
  options: { kv: Deno.Kv; now: () => Date; policy: RateLimitPolicy },
  subject: string,
): Promise<RateLimitResult> {
  const now = options.now();
  if (options.policy.counting !== "sum") {
    return await hitRateLimit(options.kv, options.policy, subject, now);
  }
  const { key } = rateCounterWindow(options.policy, subject, now);
  const prefetched = c.get("kvPrefetch")?.get(kvKeyId(key));
  const { count, ...result } = await admitBySum(
    options.kv,
    options.policy,
    subject,
    now,
    prefetched,
  );
  if (!result.allowed) return result;
  const meter = c.get("meter");
  if (meter && !meter.done) {
    meter.writes.push(count);
  } else {
    const op = options.kv.atomic();
    count(op);
    await op.commit();
  }
  return result;
}
