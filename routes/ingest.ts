/**
 * The browser pixel's ingest route (`/cdp/ingest`): no credential, tighter limits. Its rules
 * (Origin, per-client rate limit, body bound, only anonymous profiles written) are exported for
 * the Shopify pixel's door (routes/shopify_pixel.ts).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { z as zod } from "zod";
import type { AppDeps } from "../lib/http/app_env.ts";
import type { Context } from "hono";
import { parseShopDomain, type PixelShop, type PixelShopCache } from "../lib/tenancy/brands.ts";
import { shopVersionKey } from "../lib/store/kv_keys.ts";
import type { IngestEvent } from "../lib/engine/engine.ts";
import { PIXEL_NOT_ANONYMOUS } from "../lib/engine/apply_events.ts";
import { identifiedProfileIds } from "../lib/engine/profiles.ts";
import { bufferBody } from "../lib/http/body_limit.ts";
import { clientAddress } from "../lib/http/client_address.ts";
import { HttpError } from "../lib/http/errors.ts";
import { findEventType } from "../lib/engine/event_types.ts";
import {
  type AcceptedEvent,
  IngestEventSchema,
  parseJsonBody,
  type Rejection,
  validateBatch,
} from "../lib/ingest/edge.ts";
import { jsonPath } from "../lib/ingest/storable.ts";
import { acceptEvents } from "../lib/ingest/accept.ts";
import { errorResponses, newRouter, noSecurity } from "../lib/http/openapi.ts";
import { admitBySum, rateCounterWindow, type RateLimitPolicy } from "../lib/http/rate_limit.ts";

/** Limits of the browser proxy: tighter than server-side ingest. */
export const MAX_PIXEL_BODY_BYTES = 64 * 1024;
export const MAX_PIXEL_BATCH = 20;

/** The storefront doors' answers (the same for a connected and an unknown shop). */
export const PIXEL_DOOR_RESPONSES = {
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
};

const pixelIngest = createRoute({
  operationId: "ingestPixelEvents",
  method: "post",
  path: "/cdp/ingest",
  tags: ["Events"],
  summary: "Storefront pixel events (browser proxy, no credential)",
  description: "For the storefront's web pixel. The request's Origin must be the shop's " +
    "(https://<shop>, or one of a connected shop's storefront domains). A shop that is not " +
    "connected gets the same answers as a connected one; its events are dropped. Only pixel " +
    `event types; at most ${MAX_PIXEL_BATCH} events and 64 KB; a per-client rate limit. ` +
    "It writes only anonymous (pixel) profiles: an event naming a server or merged profile, or " +
    "an id starting with store_ (reserved for server-side identities), is rejected. An event's " +
    "timeStamp is clamped to [received - 72 h, received + 5 min].",
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
  responses: PIXEL_DOOR_RESPONSES,
});

/** The door of Shopify's standard events (routes/shopify_pixel.ts). */
export const SHOPIFY_PIXEL_PATH = "/cdp/ingest/shopify";
/** The credential-free storefront doors: the pixel proxy and Shopify's standard events. */
export const PIXEL_DOOR_PATHS = ["/cdp/ingest", SHOPIFY_PIXEL_PATH] as const;

/** The credential-free storefront pixel proxy. */
export function ingestRoutes(deps: AppDeps, options: { pixelShops: PixelShopCache }) {
  const router = newRouter();
  router.use("/cdp/ingest", pixelBody(deps));
  router.openapi(pixelIngest, async (c) => {
    const door = await openPixelDoor(c, deps, options.pixelShops, c.req.valid("query").shop);
    const { shop, pixelShop } = door;
    const validated = validateBatch(parseJsonBody(c.get("body")), {
      maxEvents: MAX_PIXEL_BATCH,
      newId: deps.newId,
      check: (event) => _pixelCheck(event) ?? deps.engine.checkEvent(event),
    });
    const { accepted, rejected } = await keepAnonymous(deps, shop, pixelShop, validated);
    await acceptPixelEvents(deps, door, accepted);
    return c.json({ accepted: accepted.length, rejected, scope: shop }, 202);
  });
  return router;
}

/** A storefront door's body: buffered under the door's own, small bound. */
export function pixelBody(deps: AppDeps) {
  return bufferBody({ maxBytes: MAX_PIXEL_BODY_BYTES, timeoutMs: deps.config.bodyReadTimeoutMs });
}

/** An admitted storefront request: its shop, the brand when connected, its rate-limit count. */
export interface PixelDoor {
  shop: string;
  pixelShop: PixelShop | null;
  count: (op: Deno.AtomicOperation) => void;
}

/**
 * The storefront doors' rules: the request's Origin must be one of the shop's origins, and each
 * client (shop and address) has a rate limit. Returns the shop and, when it is connected, its
 * brand. A shop that is not connected (unknown, disconnected, disabled) is answered as a connected
 * one would be, its events validated, counted as accepted and dropped: nobody learns which shops
 * are connected. Its own origin is https://<shop>; only a connected shop has more.
 */
export async function openPixelDoor(
  c: Context,
  deps: AppDeps,
  pixelShops: PixelShopCache,
  shopParam: string,
): Promise<PixelDoor> {
  const shop = parseShopDomain(shopParam);
  const origin = c.req.header("origin");
  if (!shop || !origin) {
    throw new HttpError(403, "forbidden", "this origin may not send events for that shop");
  }
  const client = clientAddress(c, deps.config.trustProxy);
  // Counted with a commutative sum, never retried: many visitors behind one address (a shop's
  // busy hour, a carrier's NAT) would otherwise contend on one counter.
  const policy: RateLimitPolicy = {
    name: "pixel",
    limit: deps.config.pixelRateLimitPerMinute,
    windowMs: 60_000,
    counting: "sum",
  };
  const subject = `${shop}|${client}`;
  const now = deps.now();
  // One KV read for both: the client's count and the shop's version (which the cache checks).
  const [counter, version] = await deps.kv.getMany([
    rateCounterWindow(policy, subject, now).key,
    shopVersionKey(shop),
  ]);
  const pixelShop = await pixelShops.get(deps.sql, shop, version!.versionstamp);
  const origins = pixelShop?.origins ?? [`https://${shop}`];
  if (!origins.includes(origin)) {
    throw new HttpError(403, "forbidden", "this origin may not send events for that shop");
  }
  c.header("Access-Control-Allow-Origin", origin);
  c.header("Vary", "Origin");

  const limited = await admitBySum(deps.kv, policy, subject, now, counter);
  if (!limited.allowed) {
    throw new HttpError(429, "rate_limited", "too many events from this client; slow down", {
      headers: { "Retry-After": String(limited.retryAfterSeconds) },
    });
  }
  return { shop, pixelShop, count: limited.count };
}

/**
 * Queues a storefront door's accepted events (a connected shop's; an unknown shop's are dropped)
 * and counts the request against the client's limit, in the queue's commit when it can.
 */
export async function acceptPixelEvents(
  deps: AppDeps,
  door: PixelDoor,
  accepted: AcceptedEvent[],
): Promise<void> {
  const { folded } = door.pixelShop
    ? await acceptEvents(deps, door.pixelShop, "pixel", accepted, { also: door.count })
    : { folded: false };
  if (!folded) {
    const op = deps.kv.atomic();
    door.count(op);
    await op.commit();
  }
}

/**
 * Of a storefront door's validated events, those naming an identified profile (server, merged or
 * an alias) are rejected: a storefront door writes only anonymous profiles. Rejections come
 * sorted by index.
 */
export async function keepAnonymous(
  deps: AppDeps,
  shop: string,
  pixelShop: PixelShop | null,
  validated: { accepted: AcceptedEvent[]; rejected: Rejection[] },
): Promise<{ accepted: AcceptedEvent[]; rejected: Rejection[] }> {
  // Asked whether the shop is connected or not, so that both answers cost the same lookup; only
  // a connected shop's profiles are the caller's to be told about. The engine checks again,
  // under the profile's lock, when it applies the event.
  const identified = await identifiedProfileIds(deps.sql, shop, [
    ...new Set(validated.accepted.map((a) => a.event.profileId)),
  ]);
  const accepted: AcceptedEvent[] = [];
  const rejected: Rejection[] = [...validated.rejected];
  for (const a of validated.accepted) {
    if (!pixelShop || !identified.has(a.event.profileId)) accepted.push(a);
    else {
      const path = jsonPath(["events", a.index, "profileId"]);
      rejected.push({ index: a.index, errors: [{ path, message: PIXEL_NOT_ANONYMOUS }] });
    }
  }
  rejected.sort((a, b) => a.index - b.index);
  return { accepted, rejected };
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
