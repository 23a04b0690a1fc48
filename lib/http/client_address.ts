/**
 * The address of the client a request came from, for per-client limits.
 *
 * @module
 */
import type { Context } from "hono";
import { getConnInfo } from "hono/deno";

/** The peer's address, or the first `X-Forwarded-For` hop when behind a trusted proxy. */
export function clientAddress(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = c.req.header("x-forwarded-for")?.split(",")[0]?.trim();
    if (forwarded) return forwarded;
  }
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    // In-process requests (tests) carry no connection.
    return "unknown";
  }
}
