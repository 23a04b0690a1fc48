/**
 * The composition root: `createApp` builds the pipeline over the stores and mounts every route
 * (docs/architecture.md).
 *
 * @module
 */
import type { OpenAPIHono } from "@hono/zod-openapi";
import { except } from "hono/combine";
import { cors } from "hono/cors";
import { adminRoutes } from "./admin.ts";
import type { Commands } from "../lib/admin/command.ts";
import { appPageRoutes } from "./app_pages/app_pages.tsx";
import { commerceRoutes } from "./commerce.ts";
import { customerRoutes } from "./customers.ts";
import { predictionRoutes } from "./predictions.ts";
import { privacyRoutes } from "./privacy.ts";
import { eventRoutes } from "./events.ts";
import { ingestRoutes, PIXEL_DOOR_PATHS } from "./ingest.ts";
import { shopifyPixelRoutes } from "./shopify_pixel.ts";
import { keyRoutes } from "./keys.ts";
import { metaRoutes } from "./meta.ts";
import { productRoutes } from "./products.ts";
import { profileRoutes } from "./profiles.ts";
import { queryRoutes } from "./query.ts";
import { destinationRoutes } from "./destinations.ts";
import { segmentRoutes } from "./segments.ts";
import { SEGMENT_POST_PATHS, segmentApiRoutes, segmentBody, segmentCredential } from "./segment.ts";
import { webhookRoutes } from "./webhooks.ts";
import type { AppDeps, AppEnv } from "../lib/http/app_env.ts";
import { accessLog } from "../lib/http/access_log.ts";
import { apiKeyAuth, sessionTokenAuth } from "../lib/http/auth.ts";
import { bodyLimit } from "../lib/http/body_limit.ts";
import { ingestAdmission } from "../lib/http/ingest_admission.ts";
import { createBrandConcurrency } from "../lib/http/brand_concurrency.ts";
import { onError, onNotFound } from "../lib/http/errors.ts";
import { createBrandCache, createPixelShopCache } from "../lib/tenancy/brands.ts";
import { createGroupCommit } from "../lib/store/kv_group_commit.ts";
import { routeGuard } from "../lib/http/route_guard.ts";
import { routeSpan } from "../lib/http/route_span.ts";
import { newRouter } from "../lib/http/openapi.ts";
import { rateCounterWindow, rateLimit, type RateLimitPolicy } from "../lib/http/rate_limit.ts";
import { usageMeter } from "../lib/http/usage.ts";
import { requestIds } from "../lib/http/request_id.ts";
import { securityHeaders } from "../lib/http/security_headers.ts";
import { ulidSource } from "../lib/ids.ts";

// Routes under /cdp that do not take an API key (session tokens, or no credential at all).
const _NOT_API_KEY_ROUTES = [...PIXEL_DOOR_PATHS, "/cdp/keys", "/cdp/keys/*"];
// A brand changed by SQL by hand (not through the service or the CLI) is seen within this.
const _BRAND_CACHE_TTL_MS = 60_000;
// A shop's storefront origins changed by SQL by hand are seen by the pixel doors within this.
const _PIXEL_SHOP_CACHE_TTL_MS = 30_000;

/**
 * Builds the HTTP app over the given stores, clock and config; the operator API runs
 * `adminCommands` (the entry point's table, lib/admin/command_table.ts).
 */
export function createApp(
  deps: AppDeps,
  options: { adminCommands?: Commands } = {},
): OpenAPIHono<AppEnv> {
  const app = newRouter();
  app.onError(onError);
  app.notFound(onNotFound);
  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description: "An API key: `Authorization: Bearer svc_...`. A brand whose shop was erased by " +
      "Shopify's shop/redact is 403 `forbidden` on every route until an operator reconnects it.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "sessionToken", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description: "A Shopify session token (HS256 JWT from App Bridge) for key management",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "segmentBasic", {
    type: "http",
    scheme: "basic",
    description: "The Segment door (/v1/*): an API key as the Basic username, empty password",
  });

  // First, so that the access log and the span see every request, the rejected ones included.
  if (deps.log) app.use(accessLog({ log: deps.log }));
  app.use(routeSpan());
  // Every answer, errors and the dashboard included (which sets its own framing headers).
  app.use(securityHeaders());
  // A request id of the server's own, never the caller's: it keys usage records and log lines.
  // Not deps.newId: a request must get an id even when that source fails.
  app.use(requestIds(ulidSource()));
  app.use(cors({
    origin: "*",
    // X-Retry-Count: analytics.js sends it on every Segment request (routes/segment.ts).
    allowHeaders: ["Authorization", "Content-Type", "X-Request-Id", "X-Retry-Count"],
    allowMethods: ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"],
    exposeHeaders: [
      "X-Request-Id",
      "X-Next-Cursor",
      "Retry-After",
      "RateLimit-Limit",
      "RateLimit-Remaining",
      "RateLimit-Reset",
    ],
    maxAge: 600,
  }));
  app.use(routeGuard(app));
  // Before authentication and metering: refusing past the bound must cost less than admitting.
  const admission = ingestAdmission({
    maxInFlight: deps.config.ingestMaxInFlight,
    backloggedInFlight: deps.config.ingestBackloggedInFlight,
    softBacklog: deps.config.ingestSoftBacklog,
    backlog: () => deps.queue.estimatedBacklog(),
  });
  app.use("/cdp/events", admission.middleware);
  for (const path of PIXEL_DOOR_PATHS) app.use(path, admission.middleware);
  for (const path of SEGMENT_POST_PATHS) app.use(path, admission.middleware);
  // The ingest routes carry their own, stricter limits: one buffering of a body is enough.
  app.use(
    except(
      // The operator API bounds its JSON itself and streams a command's FILE into it.
      ["/cdp/events", ...PIXEL_DOOR_PATHS, "/admin/*", ...SEGMENT_POST_PATHS],
      bodyLimit({ maxBytes: deps.config.maxBodyBytes, timeoutMs: deps.config.bodyReadTimeoutMs }),
    ),
  );
  // The API-wide and query limits see every request: counted with a commutative sum, so hot
  // keys never retry (docs/architecture.md states the over-admission bound). Each has a per-key
  // limit and a brand-wide ceiling, so minting more keys does not multiply a brand's share.
  const perMinute = (name: string, limit: number): RateLimitPolicy => ({
    name,
    limit,
    windowMs: 60_000,
    counting: "sum",
  });
  const apiPolicy = perMinute("api", deps.config.rateLimitPerMinute);
  const apiBrandPolicy = perMinute("api_brand", deps.config.brandRateLimitPerMinute);
  // Concurrent requests' usage records share KV transactions (the ingest routes' go with their
  // events, in the queue's own batched commit).
  const kvCommit = createGroupCommit(deps.kv);
  const apiLimit = rateLimit({
    kv: deps.kv,
    now: deps.now,
    rules: [
      { policy: apiPolicy, subject: (c) => c.get("auth").keyId, per: "key" },
      { policy: apiBrandPolicy, subject: (c) => c.get("auth").brandId, per: "brand" },
    ],
  });
  const metered = [usageMeter<AppEnv>(deps, { commit: kvCommit }), apiLimit];
  const brands = createBrandCache({ ttlMs: _BRAND_CACHE_TTL_MS, now: deps.now });
  const apiKeys = apiKeyAuth<AppEnv>(deps, {
    brands,
    prefetch: (key) => [
      rateCounterWindow(apiPolicy, key.id, deps.now()).key,
      rateCounterWindow(apiBrandPolicy, key.brand, deps.now()).key,
    ],
  });
  app.use("/cdp/*", except(_NOT_API_KEY_ROUTES, apiKeys, ...metered));
  // The Segment door reads its own body (gzip, 500 KB) and key (Basic, writeKey or Bearer).
  const segmentKeys = apiKeyAuth<AppEnv>(deps, {
    brands,
    token: segmentCredential,
    prefetch: (key) => [
      rateCounterWindow(apiPolicy, key.id, deps.now()).key,
      rateCounterWindow(apiBrandPolicy, key.brand, deps.now()).key,
    ],
  });
  for (const path of SEGMENT_POST_PATHS) {
    app.use(path, segmentBody(deps), segmentKeys, ...metered);
  }
  // In Hono "/cdp/keys/*" also matches "/cdp/keys" itself.
  app.use("/cdp/keys/*", sessionTokenAuth<AppEnv>(deps), ...metered);
  // The query throttle, on top of the API-wide limit.
  app.use(
    "/cdp/query/*",
    rateLimit({
      kv: deps.kv,
      now: deps.now,
      rules: [
        {
          policy: perMinute("query", deps.config.queryRateLimitPerMinute),
          subject: (c) => c.get("auth").keyId,
          per: "key",
        },
        {
          policy: perMinute("query_brand", deps.config.brandQueryRateLimitPerMinute),
          subject: (c) => c.get("auth").brandId,
          per: "brand",
        },
      ],
    }),
  );

  app.route("/", eventRoutes(deps));
  // One cache of shops (connected or not) for both storefront doors.
  const pixelShops = createPixelShopCache({ ttlMs: _PIXEL_SHOP_CACHE_TTL_MS, now: deps.now });
  app.route("/", ingestRoutes(deps, { pixelShops }));
  app.route("/", shopifyPixelRoutes(deps, { pixelShops }));
  app.route("/", segmentApiRoutes(deps));
  app.route("/", keyRoutes(deps));
  app.route("/", profileRoutes(deps));
  // One brand's heavy reads (every read evaluating its conditions) take at most half the pool.
  const heavyReads = createBrandConcurrency(deps.sql.options.max);
  app.route("/", segmentRoutes(deps, { heavyReads }));
  app.route("/", destinationRoutes(deps));
  app.route("/", queryRoutes(deps, { heavyReads }));
  app.route("/", commerceRoutes(deps));
  app.route("/", productRoutes(deps));
  app.route("/", customerRoutes(deps, { heavyReads }));
  app.route("/", predictionRoutes(deps));
  app.route("/", privacyRoutes(deps));
  app.route("/", webhookRoutes(deps));
  // Without ADMIN_TOKEN (or a command table) the operator API does not exist: its paths are 404
  // like any unknown one.
  if (deps.config.adminToken && options.adminCommands) {
    app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
      type: "http",
      scheme: "bearer",
      description: "ADMIN_TOKEN: the operator API (`/admin`)",
    });
    // Only a server takes COPY: when the caller did not say, DATABASE_URL tells which it is.
    const database = deps.database ??
      { mode: deps.config.databaseUrl ? "postgres" as const : "embedded-owner" as const };
    app.route(
      "/",
      adminRoutes(deps, {
        commands: options.adminCommands,
        stores: { kv: deps.kv, sql: deps.sql, database, queue: deps.queue, cipher: deps.cipher },
        token: deps.config.adminToken,
      }),
    );
  }
  // The dashboard's pages read what the API reads: they count against the same limits, per
  // page session (as a key) and brand-wide, so a page reloaded in a loop is bounded too.
  app.route("/", appPageRoutes(deps, { brands, heavyReads, rateLimit: apiLimit }));
  app.route("/", metaRoutes(deps, app));
  return app;
}
