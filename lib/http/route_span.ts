/**
 * Names the request's trace span by its route. With `OTEL_DENO=true` Deno traces every request
 * of `Deno.serve` in a span named by the method alone; this middleware renames it
 * `METHOD /route/:pattern` and sets `http.route`, through the OpenTelemetry API Deno registers
 * its tracer with. Without telemetry there is no active span and it does nothing.
 *
 * @module
 */
import { trace } from "@opentelemetry/api";
import type { MiddlewareHandler } from "hono";
import { routePattern } from "./access_log.ts";

/** Builds the middleware that names the active span by the matched route pattern. */
export function routeSpan(): MiddlewareHandler {
  return async function routeSpanMiddleware(c, next) {
    await next();
    const span = trace.getActiveSpan();
    const route = span ? routePattern(c) : null;
    if (!span || route === null) return;
    span.setAttribute("http.route", route);
    span.updateName(`${c.req.method} ${route}`);
  };
}
