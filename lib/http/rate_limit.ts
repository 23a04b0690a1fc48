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

/** One limit a request meets: a policy, and the subject (a key, a brand, an address) it counts. */
export interface RateLimitHit {
  policy: RateLimitPolicy;
  subject: string;
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
  const { policy: _, ...result } = await hitRateLimits(kv, [{ policy, subject }], now);
  return result;
}

/**
 * Counts one hit against several check-and-set limits at once (a key's and its brand's): all
 * are counted in one atomic KV operation, or none when one of them is full. The result is the
 * refusing limit's, or else the one with the fewest hits left, with its `policy`.
 */
export async function hitRateLimits(
  kv: Deno.Kv,
  hits: RateLimitHit[],
  now: Date,
): Promise<RateLimitResult & { policy: RateLimitPolicy }> {
  const windows = hits.map(({ policy, subject }) => {
    const windowStart = Math.floor(now.getTime() / policy.windowMs) * policy.windowMs;
    return {
      policy,
      key: rateLimitKey(policy.name, subject, windowStart),
      retryAfterSeconds: Math.max(
        1,
        Math.ceil((windowStart + policy.windowMs - now.getTime()) / 1000),
      ),
    };
  });
  const refused = (window: (typeof windows)[number]) => ({
    allowed: false,
    limit: window.policy.limit,
    remaining: 0,
    retryAfterSeconds: window.retryAfterSeconds,
    policy: window.policy,
  });
  // A failed check means another hit was counted, and the windows count at most their limits
  // together, so that many attempts plus one always end in a verdict: contention alone never
  // refuses a hit.
  const attempts = windows.reduce((sum, window) => sum + window.policy.limit, 0);
  for (let attempt = 0; attempt <= attempts; attempt++) {
    const entries = await kv.getMany<number[]>(windows.map((window) => window.key));
    const full = windows.findIndex((window, i) => (entries[i]!.value ?? 0) >= window.policy.limit);
    if (full >= 0) return refused(windows[full]!);
    const op = kv.atomic();
    let tightest = 0;
    windows.forEach((window, i) => {
      const entry = entries[i]!;
      const count = entry.value ?? 0;
      op.check(entry).set(window.key, count + 1, { expireIn: window.policy.windowMs + 60_000 });
      const left = window.policy.limit - count - 1;
      const tightestLeft = windows[tightest]!.policy.limit - (entries[tightest]!.value ?? 0) - 1;
      if (left < tightestLeft) tightest = i;
    });
    if ((await op.commit()).ok) {
      const window = windows[tightest]!;
      return {
        allowed: true,
        limit: window.policy.limit,
        remaining: window.policy.limit - (entries[tightest]!.value ?? 0) - 1,
        retryAfterSeconds: window.retryAfterSeconds,
        policy: window.policy,
      };
    }
  }
  // Unreachable while only this function writes the keys; refusing is the safe answer.
  return refused(windows[0]!);
}

/** One limit of a {@linkcode rateLimit} middleware. */
export interface RateLimitRule {
  policy: RateLimitPolicy;
  /** What the limit counts for this request; null skips the limit. */
  subject: (c: Context<AppEnv>) => string | null;
  /** Whom the limit is per, for the 429's description (`key`, `brand`). */
  per?: string;
}

/**
 * Middleware factory: throttles each request against every rule (a rule whose subject is null
 * is skipped), sets the IETF `RateLimit-*` headers of the tightest limit, and answers 429 with
 * `Retry-After` past any of them; a refused request is counted by none. `sum`-counted hits join
 * the usage meter's one KV commit when there is one (else they commit at once), and read their
 * windows from `c.var.kvPrefetch` when authentication read them ahead.
 */
export function rateLimit(options: {
  kv: Deno.Kv;
  now: () => Date;
  rules: RateLimitRule[];
  code?: ErrorCode;
}): MiddlewareHandler<AppEnv> {
  return async function rateLimitMiddleware(c, next) {
    const now = options.now();
    const exact: (RateLimitHit & { per?: string })[] = [];
    const summed: { rule: RateLimitRule; result: Awaited<ReturnType<typeof admitBySum>> }[] = [];
    for (const rule of options.rules) {
      const subject = rule.subject(c);
      if (subject === null) continue;
      if (rule.policy.counting !== "sum") {
        exact.push({ policy: rule.policy, subject, per: rule.per });
        continue;
      }
      const { key } = rateCounterWindow(rule.policy, subject, now);
      const prefetched = c.get("kvPrefetch")?.get(kvKeyId(key));
      summed.push({
        rule,
        result: await admitBySum(options.kv, rule.policy, subject, now, prefetched),
      });
    }
    if (exact.length === 0 && summed.length === 0) return await next();
    const outcomes: (RateLimitResult & { per?: string; windowMs: number })[] = summed.map((
      { rule, result },
    ) => ({ ...result, per: rule.per, windowMs: rule.policy.windowMs }));
    // The exact limits count at once, so they are asked only once the summed ones admit.
    if (outcomes.every((outcome) => outcome.allowed) && exact.length > 0) {
      const result = await hitRateLimits(options.kv, exact, now);
      const per = exact.find((hit) => hit.policy === result.policy)?.per;
      outcomes.push({ ...result, per, windowMs: result.policy.windowMs });
    }
    const refusal = outcomes.find((outcome) => !outcome.allowed);
    const shown = refusal ??
      outcomes.reduce((tightest, outcome) =>
        outcome.remaining < tightest.remaining ? outcome : tightest
      );
    const headers = {
      "RateLimit-Limit": String(shown.limit),
      "RateLimit-Remaining": String(shown.remaining),
      "RateLimit-Reset": String(shown.retryAfterSeconds),
    };
    if (refusal) {
      throw new HttpError(
        429,
        options.code ?? "rate_limited",
        `Rate limit of ${refusal.limit} requests per ${refusal.windowMs / 1000}s${
          refusal.per ? ` per ${refusal.per}` : ""
        } exceeded; retry after ${refusal.retryAfterSeconds}s`,
        { headers: { ...headers, "Retry-After": String(refusal.retryAfterSeconds) } },
      );
    }
    await _countSummed(c, options.kv, summed.map(({ result }) => result.count));
    await next();
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  };
}

async function _countSummed(
  c: Context<AppEnv>,
  kv: Deno.Kv,
  counts: ((op: Deno.AtomicOperation) => void)[],
): Promise<void> {
  if (counts.length === 0) return;
  const meter = c.get("meter");
  if (meter && !meter.done) {
    meter.writes.push(...counts);
    return;
  }
  const op = kv.atomic();
  for (const count of counts) count(op);
  await op.commit();
}
