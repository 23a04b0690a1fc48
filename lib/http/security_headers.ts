/**
 * Transport and content-type headers on every answer: `Strict-Transport-Security` (browsers
 * keep to HTTPS for the service's host) and `X-Content-Type-Options: nosniff` (a JSON or text
 * answer is never run as a script or style). Framing headers are left alone: the dashboard is
 * framed by the Shopify admin and sets its own `frame-ancestors`.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";

/** The headers {@linkcode securityHeaders} sets, by name. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  // Two years: the value HSTS preload lists ask for; browsers ignore it over plain HTTP.
  "Strict-Transport-Security": "max-age=63072000; includeSubDomains",
  "X-Content-Type-Options": "nosniff",
};

/** Middleware: adds {@linkcode SECURITY_HEADERS} to the answer, whatever produced it. */
export function securityHeaders(): MiddlewareHandler {
  return async function securityHeadersMiddleware(c, next) {
    await next();
    try {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(name, value);
    } catch {
      // A response with immutable headers (one built by fetch): answer a copy.
      c.res = new Response(c.res.body, c.res);
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(name, value);
    }
  };
}
