/**
 * Service routes: liveness (`/healthz`), readiness (`/readyz`), the OpenAPI document and the
 * /docs page.
 *
 * @module
 */
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppDeps, AppEnv } from "../lib/http/app_env.ts";
import { HttpError } from "../lib/http/errors.ts";
import { errorResponses, newRouter } from "../lib/http/openapi.ts";
import { pendingMigrations } from "../lib/store/migrations.ts";
import { DOCS_PAGE } from "./docs_page.ts";

const health = createRoute({
  method: "get",
  path: "/healthz",
  tags: ["Meta"],
  summary: "Liveness and store reachability",
  responses: {
    200: {
      description: "Both stores answer",
      content: { "application/json": { schema: z.object({ status: z.literal("ok") }) } },
    },
    ...errorResponses(503),
  },
});

const ready = createRoute({
  method: "get",
  path: "/readyz",
  tags: ["Meta"],
  summary: "Readiness: both stores answer and every migration is applied",
  responses: {
    200: {
      description: "Ready to serve",
      content: { "application/json": { schema: z.object({ status: z.literal("ready") }) } },
    },
    ...errorResponses(503),
  },
});

// A load balancer's health check gives up after a few seconds: answer before it does.
const _HEALTH_MS = 2_000;

/** Runs `probe` within the health budget; 503 `service_unavailable` when it fails or is late. */
async function _withinBudget<T>(probe: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("no answer within the health budget")), _HEALTH_MS);
  });
  try {
    return await Promise.race([probe, late]);
  } catch (err) {
    // A probe that loses the race still settles; its rejection must not go unhandled.
    probe.catch(() => {});
    throw new HttpError(503, "service_unavailable", "a store is unreachable", {
      cause: err,
      headers: { "Retry-After": "1" },
    });
  } finally {
    clearTimeout(timer);
  }
}

/** Health and readiness checks, the OpenAPI 3.1 document and the interactive reference page. */
export function metaRoutes(deps: Pick<AppDeps, "kv" | "sql">, app: OpenAPIHono<AppEnv>) {
  const router = newRouter();
  router.openapi(health, async (c) => {
    await _withinBudget(Promise.all([deps.sql`select 1`, deps.kv.get(["health"])]));
    return c.json({ status: "ok" as const }, 200);
  });
  router.openapi(ready, async (c) => {
    const [pending] = await _withinBudget(
      Promise.all([pendingMigrations(deps.sql), deps.kv.get(["health"])]),
    );
    if (pending.length > 0) {
      throw new HttpError(
        503,
        "service_unavailable",
        `migrations not applied: ${pending.join(", ")} (run \`deno task admin migrate\`)`,
        { headers: { "Retry-After": "5" } },
      );
    }
    return c.json({ status: "ready" as const }, 200);
  });
  // Built on first request, when every route is registered; routes do not change afterwards.
  let document: unknown;
  router.get("/openapi.json", (c) => {
    document ??= app.getOpenAPI31Document({
      openapi: "3.1.0",
      info: {
        title: "Customer Data Service",
        version: "1.0.0",
        description: "Events, profiles, segments, queries, commerce and insights for one brand " +
          "per API key. Errors use the envelope { error, error_description }.",
      },
    });
    return c.json(document);
  });
  router.get("/docs", (c) => c.html(DOCS_PAGE));
  return router;
}
