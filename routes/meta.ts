/**
 * Service routes: liveness (`/healthz`), readiness (`/readyz`), the OpenAPI document and the
 * /docs page.
 *
 * @module
 */
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppDeps, AppEnv } from "../lib/http/app_env.ts";
import { HttpError } from "../lib/http/errors.ts";
import { errorResponses, jsonResponse, newRouter, noSecurity } from "../lib/http/openapi.ts";
import { healthProbeKey } from "../lib/store/kv_keys.ts";
import { pendingMigrations } from "../lib/store/migrations.ts";
import { DOCS_PAGE } from "./docs_page.ts";

const health = createRoute({
  operationId: "getHealth",
  method: "get",
  path: "/healthz",
  tags: ["Meta"],
  summary: "Liveness and store reachability",
  security: noSecurity,
  responses: {
    200: jsonResponse(z.object({ status: z.literal("ok") }), "Both stores answer", {
      status: "ok",
    }),
    ...errorResponses(405, 503),
  },
});

const ready = createRoute({
  operationId: "getReadiness",
  method: "get",
  path: "/readyz",
  tags: ["Meta"],
  summary: "Readiness: both stores answer and every migration is applied",
  security: noSecurity,
  responses: {
    200: jsonResponse(z.object({ status: z.literal("ready") }), "Ready to serve", {
      status: "ready",
    }),
    ...errorResponses(405, 503),
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
    await _withinBudget(Promise.all([deps.sql`select 1`, deps.kv.get(healthProbeKey())]));
    return c.json({ status: "ok" as const }, 200);
  });
  router.openapi(ready, async (c) => {
    const [pending] = await _withinBudget(
      Promise.all([pendingMigrations(deps.sql), deps.kv.get(healthProbeKey())]),
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
  // The operator API (/admin) is left out unless asked for with ?admin=1.
  let documents: { full: OpenApiDocument; public: OpenApiDocument } | undefined;
  router.get("/openapi.json", (c) => {
    documents ??= _documents(app);
    return c.json(c.req.query("admin") === "1" ? documents.full : documents.public);
  });
  router.get("/docs", (c) => c.html(DOCS_PAGE));
  return router;
}

type OpenApiDocument = ReturnType<OpenAPIHono<AppEnv>["getOpenAPI31Document"]>;

function _documents(app: OpenAPIHono<AppEnv>) {
  const full = app.getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Customer Data Service",
      version: "1.0.0",
      description: "Events, profiles, segments, queries, commerce and insights for one brand " +
        "per API key. Errors use the envelope { error, error_description }.",
    },
    // Relative: the service that serves this document, wherever it is deployed.
    servers: [{ url: "/", description: "This service" }],
  });
  const paths = Object.fromEntries(
    Object.entries(full.paths ?? {}).filter(([path]) => !path.startsWith("/admin/")),
  );
  const { adminToken: _, ...securitySchemes } = full.components?.securitySchemes ?? {};
  return {
    full,
    public: { ...full, paths, components: { ...full.components, securitySchemes } },
  };
}
