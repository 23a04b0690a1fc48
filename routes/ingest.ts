/**
 * The browser pixel's ingest route (`/cdp/ingest`): no credential, tighter limits.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { z as zod } from "zod";
import type { AppDeps } from "../lib/http/app_env.ts";
import { findPixelShop, parseShopDomain } from "../lib/tenancy/brands.ts";
import type { IngestEvent } from "../lib/engine/engine.ts";
import { bufferBody } from "../lib/http/body_limit.ts";
import { clientAddress } from "../lib/http/client_address.ts";
import { HttpError } from "../lib/http/errors.ts";
import type { GroupCommit } from "../lib/store/kv_group_commit.ts";
import { findEventType } from "../lib/engine/event_types.ts";
import { IngestEventSchema, parseJsonBody, queueBatch, validateBatch } from "../lib/ingest/edge.ts";
import { errorResponses, newRouter, noSecurity } from "../lib/http/openapi.ts";
import { hitRateLimit } from "../lib/http/rate_limit.ts";

/** Limits of the browser proxy: tighter than server-side ingest. */
export const MAX_PIXEL_BODY_BYTES = 64 * 1024;
export const MAX_PIXEL_BATCH = 20;

const pixelIngest = createRoute({
  operationId: "ingestPixelEvents",
  method: "post",
  path: "/cdp/ingest",
  tags: ["Events"],
  summary: "Storefront pixel events (browser proxy, no credential)",
  description: "For the storefront's web pixel. The shop must be connected, and the request's " +
    "Origin must be the shop's (https://<shop> or one of its storefront domains). Only pixel " +
    `event types; at most ${MAX_PIXEL_BATCH} events and 64 KB; a per-client rate limit. ` +
    "Profiles created here have pixel provenance; ids starting with store_ are reserved for " +
    "server-side identities.",
  security: noSecurity,
  request: {
    query: z.object({
      shop: z.string().min(1).max(255).openapi({ example: "acme.myshopify.com" }),
    }),
    body: {
      required: true,
      content: {
        "application/json": {
          schema: zod.toJSONSchema(
            zod.strictObject({ events: zod.array(IngestEventSchema).min(1).max(MAX_PIXEL_BATCH) }),
            { target: "draft-2020-12" },
          ) as never,
          example: {
            events: [{
              eventType: "product_viewed",
              profileId: "anon_5f2c9a1e",
              properties: { productId: "632910392" },
            }],
          },
        },
      },
    },
  },
  responses: {
    202: {
      description: "Queued",
      content: {
        "application/json": {
          schema: z.object({
            accepted: z.number().int(),
            rejected: z.array(z.object({
              index: z.number().int(),
              errors: z.array(z.object({ path: z.string(), message: z.string() })),
            })),
            scope: z.string(),
          }),
          example: { accepted: 1, rejected: [], scope: "acme.myshopify.com" },
        },
      },
    },
    ...errorResponses(400, 403, 405, 408, 413, 429, 503),
  },
});

/** The credential-free storefront pixel proxy. */
export function ingestRoutes(deps: AppDeps, options: { queueCommit: GroupCommit }) {
  const router = newRouter();
  router.use(
    "/cdp/ingest",
    bufferBody({ maxBytes: MAX_PIXEL_BODY_BYTES, timeoutMs: deps.config.bodyReadTimeoutMs }),
  );
  router.openapi(pixelIngest, async (c) => {
    const shop = parseShopDomain(c.req.valid("query").shop);
    const origin = c.req.header("origin");
    const pixelShop = shop ? await findPixelShop(deps.sql, shop) : null;
    // One answer for an unknown shop, a disconnected one and a foreign origin: a browser learns
    // nothing about which shops are connected.
    if (!pixelShop || !origin || !pixelShop.origins.includes(origin)) {
      throw new HttpError(403, "forbidden", "this origin may not send events for that shop");
    }
    c.header("Access-Control-Allow-Origin", origin);
    c.header("Vary", "Origin");

    const client = clientAddress(c, deps.config.trustProxy);
    const policy = { name: "pixel", limit: deps.config.pixelRateLimitPerMinute, windowMs: 60_000 };
    const limited = await hitRateLimit(deps.kv, policy, `${pixelShop.scope}|${client}`, deps.now());
    if (!limited.allowed) {
      throw new HttpError(429, "rate_limited", "too many events from this client; slow down", {
        headers: { "Retry-After": String(limited.retryAfterSeconds) },
      });
    }

    const { accepted, rejected } = validateBatch(parseJsonBody(c.get("body")), {
      maxEvents: MAX_PIXEL_BATCH,
      tooLargeCode: "batch_too_large",
      newId: deps.newId,
      check: (event) => _pixelCheck(event) ?? deps.engine.checkEvent(event),
    });
    await queueBatch(deps, {
      brandId: pixelShop.brandId,
      batch: {
        scope: pixelShop.scope,
        source: "pixel",
        receivedAt: deps.now().toISOString(),
        events: accepted.map((a) => a.event),
      },
      commit: options.queueCommit,
      sizes: accepted.map((a) => a.storedBytes),
    });
    return c.json({ accepted: accepted.length, rejected, scope: pixelShop.scope }, 202);
  });
  return router;
}

/** Pixel-only rules on top of the engine's schema check. */
function _pixelCheck(event: IngestEvent): { error: string; field: string } | null {
  if (findEventType(event.eventType)?.category !== "pixel") {
    return { error: `only storefront pixel event types are accepted here`, field: "eventType" };
  }
  if (event.profileId.startsWith("store_")) {
    return {
      error: "ids starting with store_ are reserved for server-side identities",
      field: "profileId",
    };
  }
  return null;
}
