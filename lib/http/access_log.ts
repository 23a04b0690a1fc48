/**
 * The access log: one JSON line per request, written when the response is ready, with the
 * method, the route pattern (never the path's ids), the status, the duration, the server's request
 * id, the brand when authentication found one and the caller's own `X-Request-Id` when it sent
 * one. Never a credential, a query string or a body.
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { LogLevel } from "../log.ts";

/** The route pattern a request matched (`/cdp/profiles/:id`), or null when none did. */
export function routePattern(c: Context): string | null {
  const routes = matchedRoutes(c);
  // Middlewares are registered for every method ("ALL"); the last handler with a method is the
  // route's own.
  for (let i = routes.length - 1; i >= 0; i--) {
    const route = routes[i]!;
    if (route.method !== "ALL") return route.path;
  }
  return null;
}

/** Builds the access-log middleware over a log function (lib/log.ts) and a monotonic clock. */
export function accessLog(deps: {
  log: (level: LogLevel, message: string, fields: Record<string, unknown>) => void;
  clock?: () => number;
}): MiddlewareHandler {
  const clock = deps.clock ?? (() => performance.now());
  return async function accessLogMiddleware(c, next) {
    const started = clock();
    await next();
    const status = c.res.status;
    const auth = c.get("auth") as { brandId?: string } | undefined;
    const clientRequestId = c.get("clientRequestId") as string | null | undefined;
    deps.log(status >= 500 ? "warn" : "info", "request", {
      method: c.req.method,
      route: routePattern(c),
      status,
      duration_ms: Math.round((clock() - started) * 10) / 10,
      request_id: c.get("requestId") ?? null,
      brand_id: auth?.brandId ?? null,
      ...(clientRequestId ? { client_request_id: clientRequestId } : {}),
    });
  };
}
