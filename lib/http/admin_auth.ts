/**
 * Authentication of the operator API (`/admin`): the bearer token must be ADMIN_TOKEN, compared
 * in constant time.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { HttpError } from "./errors.ts";

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

/** Middleware: 401 unless the request carries `Authorization: Bearer <token>`. */
export function adminAuth(token: string): MiddlewareHandler {
  return async function adminAuthMiddleware(c, next) {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
    if (!match || !(await tokensEqual(match[1]!, token))) {
      throw new HttpError(401, "unauthorized", "Missing or invalid admin token", {
        headers: { "WWW-Authenticate": 'Bearer realm="admin"' },
      });
    }
    await next();
  };
}
