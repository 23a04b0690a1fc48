/**
 * The address of the client a request came from, for per-client limits (the pixel proxy, failed
 * operator logins).
 *
 * @module
 */
import type { Context } from "hono";
import { getConnInfo } from "hono/deno";

// A trusted proxy writes an address; anything longer did not come from one.
const _MAX_ADDRESS_CHARS = 100;

/**
 * The client's address behind `trustedHops` reverse proxies (TRUST_PROXY). Each proxy appends
 * the address it received the request from to `X-Forwarded-For`, so only the last
 * `trustedHops` entries were written by proxies we trust: the client is the entry that many from
 * the right. Everything left of it is whatever the client sent, which is why the leftmost entry
 * is never read. With 0 hops, or a header shorter than the proxy chain (the request did not
 * come through it), the socket's peer is the client.
 */
export function clientAddress(c: Context, trustedHops: number): string {
  if (trustedHops > 0) {
    const entries = (c.req.header("x-forwarded-for") ?? "").split(",")
      .map((entry) => entry.trim())
      .filter((entry) => entry !== "");
    const client = entries[entries.length - trustedHops];
    if (client !== undefined) return client.slice(0, _MAX_ADDRESS_CHARS).toLowerCase();
  }
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    // In-process requests (tests) carry no connection.
    return "unknown";
  }
}
