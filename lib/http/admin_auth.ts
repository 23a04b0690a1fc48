/**
 * Authentication of the operator API (`/admin`): the bearer token must be ADMIN_TOKEN, compared
 * in constant time; failed attempts are limited per source.
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { HttpError } from "./errors.ts";
import { hitRateLimit, type RateLimitPolicy } from "./rate_limit.ts";

const _encoder = new TextEncoder();

async function _digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", _encoder.encode(text)));
}

/**
 * True when `presented` is `expected`. Both are hashed first, so the comparison runs over the
 * same 32 bytes whatever their lengths, and it never stops at the first difference: its time
 * tells nothing about how much of a guess was right.
 */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([_digest(presented), _digest(expected)]);
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

/** What {@linkcode adminAuth} needs: the token, and where and how failures are counted. */
export interface AdminAuthOptions {
  token: string;
  kv: Deno.Kv;
  now: () => Date;
  /** Failed attempts one source may make per minute; past it, 429 until the window ends. */
  failuresPerMinute: number;
  /** The source a request comes from (its client address behind the trusted proxies). */
  source: (c: Context) => string;
}

/**
 * Middleware: lets a request with `Authorization: Bearer <token>` through, else 401, or 429 once
 * its source has failed `failuresPerMinute` times in the current minute. The token is checked
 * first and a valid one always passes: only failures are counted, per source, so nobody's
 * guesses (another client's, or a shared proxy address's) can lock the operator out.
 */
export function adminAuth(options: AdminAuthOptions): MiddlewareHandler {
  const policy: RateLimitPolicy = {
    name: "admin_failures",
    limit: options.failuresPerMinute,
    windowMs: 60_000,
  };
  return async function adminAuthMiddleware(c, next) {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (match && (await tokensEqual(match[1]!, options.token))) return await next();
    const counted = await hitRateLimit(options.kv, policy, options.source(c), options.now());
    if (!counted.allowed) {
      throw new HttpError(
        429,
        "rate_limited",
        "Too many failed admin authentications from this address; retry after " +
          `${counted.retryAfterSeconds}s`,
        { headers: { "Retry-After": String(counted.retryAfterSeconds) } },
      );
    }
    throw new HttpError(401, "unauthorized", "Missing or invalid admin token", {
      headers: { "WWW-Authenticate": 'Bearer realm="admin"' },
    });
  };
}
