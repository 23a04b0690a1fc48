import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "./app_env.ts";
import { type ErrorCode, HttpError } from "./errors.ts";
import { rateLimitKey } from "./kv_keys.ts";

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
 * `RateLimit-*` headers, and answers 429 with `Retry-After` past the limit.
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
    const result = await hitRateLimit(options.kv, options.policy, subject, options.now());
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
