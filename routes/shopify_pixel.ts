/**
 * `POST /cdp/ingest/shopify`: Shopify's Web Pixels standard events as the storefront's pixel
 * (extensions/web-pixel) sends them, credential-free under the pixel proxy's rules
 * (routes/ingest.ts), mapped by lib/ingest/shopify_pixel_spec.ts onto the one ingest pipeline
 * (`validateBuiltEvents`, then `acceptEvents`). A `checkout_completed`'s claim is recorded for
 * verified stitching (lib/shopify/pixel_claims.ts).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppDeps } from "../lib/http/app_env.ts";
import type { IngestEvent } from "../lib/engine/engine.ts";
import { parseJsonBody, type Rejection, validateBuiltEvents } from "../lib/ingest/edge.ts";
import { jsonPath } from "../lib/ingest/storable.ts";
import { segmentEventId } from "../lib/ingest/segment_spec.ts";
import {
  mapShopifyPixelEvent,
  parseShopifyPixelEvent,
  type PixelClaim,
  SHOPIFY_PIXEL_EVENTS,
} from "../lib/ingest/shopify_pixel_spec.ts";
import { queueStitch, recordPixelClaims } from "../lib/shopify/pixel_claims.ts";
import { DomainError } from "../lib/errors.ts";
import type { PixelShopCache } from "../lib/tenancy/brands.ts";
import { newRouter, noSecurity } from "../lib/http/openapi.ts";
import {
  acceptPixelEvents,
  MAX_PIXEL_BATCH,
  openPixelDoor,
  PIXEL_DOOR_RESPONSES,
  pixelBody,
  SHOPIFY_PIXEL_PATH,
} from "./ingest.ts";

const _MAPPING = [
  "| Shopify event | Stored as | Properties |",
  "| --- | --- | --- |",
  "| `page_viewed` | `page_viewed` | `url`, `path`, `search`, `title`, `referrer` |",
  "| `product_viewed` | `product_viewed` | `productId`, `variantId`, `title`, `variantTitle`, " +
  "`sku`, `vendor`, `productType`, `price`, `currencyCode`, `url` |",
  "| `collection_viewed` | `collection_viewed` | `collectionId`, `title`, `productCount`, `url` |",
  "| `search_submitted` | `search_submitted` | `query`, `resultCount` |",
  "| `product_added_to_cart`, `product_removed_from_cart` | same name | the variant's, " +
  "`quantity`, `lineTotal` |",
  "| `cart_viewed` | `cart_viewed` | `cartId`, `totalPrice`, `currencyCode`, `lineItemCount`, " +
  "`totalQuantity`, `lines` |",
  "| `checkout_started`, `checkout_contact_info_submitted`, `checkout_address_info_submitted`, " +
  "`checkout_shipping_info_submitted`, `payment_info_submitted` | same name | `checkoutToken`, " +
  "`totalPrice`, `subtotalPrice`, `currencyCode`, `lineItemCount`, `lines` |",
  "| `checkout_completed` | `checkout_completed` | the checkout's, `orderId`, `customerId` |",
].join("\n");

const shopifyPixelRoute = createRoute({
  operationId: "ingestShopifyPixelEvents",
  method: "post",
  path: SHOPIFY_PIXEL_PATH,
  tags: ["Events"],
  summary: "Shopify Web Pixels standard events (the storefront pixel, no credential)",
  description: "For the storefront's Shopify web pixel (app extension or custom pixel). The " +
    "rules of `POST /cdp/ingest`: the Origin must be one of the shop's; an unknown shop gets the " +
    `same answer as a connected one; at most ${MAX_PIXEL_BATCH} events and 64 KB; a per-client ` +
    "rate limit; only anonymous (pixel) profiles are written (an event naming an identified " +
    "profile is accepted here, then refused where events are applied and dead-lettered with its " +
    "reason). Any Content-Type (the sandbox's " +
    "`sendBeacon` sends text/plain). Each event is one of Shopify's standard event objects " +
    "(`id`, `name`, `timestamp`, `clientId`, `context`, `data`): the profile is `clientId`, the " +
    "event id Shopify's `id` (an event sent twice is stored once), the time `timestamp` (clamped " +
    "to [received - 72 h, received + 5 min]), and `properties.context` the page context " +
    "(`page.url`, `path`, `search`, `referrer`, `title`, `userAgent`, `locale`). An unknown or " +
    "malformed event is refused alone. A `checkout_completed` with an order id is a claim that " +
    "the visitor placed that order: the visitor is merged into the customer's profile only " +
    "once the order arrives from Shopify (a verified webhook or the backfill) with a matching " +
    "email.\n\n" + _MAPPING,
  security: noSecurity,
  request: {
    query: z.object({
      shop: z.string().min(1).max(255).openapi({ example: "acme.myshopify.com" }),
    }),
    body: {
      required: true,
      content: {
        "text/plain": {
          schema: z.object({
            events: z.array(z.looseObject({
              id: z.string(),
              name: z.enum(SHOPIFY_PIXEL_EVENTS),
              timestamp: z.string(),
              clientId: z.string(),
              context: z.record(z.string(), z.unknown()).optional(),
              data: z.record(z.string(), z.unknown()).optional(),
            })).min(1).max(MAX_PIXEL_BATCH),
          }) as never,
          example: {
            events: [{
              id: "sh-88153c5a-8F2D-4CCA-3231-EF5C032A4C3B",
              name: "page_viewed",
              timestamp: "2026-11-24T13:02:56.659Z",
              clientId: "sh-81a5d3c2-5F11-4B8D-8E24-BC1F46E5C9A1",
              context: {
                document: {
                  location: {
                    href: "https://acme.myshopify.com/?utm_source=news",
                    pathname: "/",
                    search: "?utm_source=news",
                  },
                  referrer: "https://www.google.com/",
                  title: "Acme",
                },
                navigator: { userAgent: "Mozilla/5.0", language: "en-US" },
              },
              data: {},
            }],
          },
        },
      },
    },
  },
  responses: PIXEL_DOOR_RESPONSES,
});

/** The Shopify standard-events door. */
export function shopifyPixelRoutes(deps: AppDeps, options: { pixelShops: PixelShopCache }) {
  const router = newRouter();
  router.use(SHOPIFY_PIXEL_PATH, pixelBody(deps));
  router.openapi(
    shopifyPixelRoute,
    (c) => _ingest(c, deps, options.pixelShops, c.req.valid("query").shop),
  );
  return router;
}

async function _ingest(c: Context, deps: AppDeps, pixelShops: PixelShopCache, shopParam: string) {
  const door = await openPixelDoor(c, deps, pixelShops, shopParam);
  const { shop, pixelShop } = door;
  const body = parseJsonBody(c.get("body")).value as { events?: unknown } | null;
  const events = typeof body === "object" && body !== null && !Array.isArray(body)
    ? body.events
    : undefined;
  if (!Array.isArray(events) || events.length === 0) {
    throw new DomainError("invalid_input", "body must be a JSON object { events: [...] }");
  }
  if (events.length > MAX_PIXEL_BATCH) {
    throw new DomainError("batch_too_large", `at most ${MAX_PIXEL_BATCH} events per request`);
  }
  const built: { index: number; event: IngestEvent }[] = [];
  const rejected: Rejection[] = [];
  const claims = new Map<string, PixelClaim>();
  for (let index = 0; index < events.length; index++) {
    const parsed = parseShopifyPixelEvent(events[index]);
    if (!parsed.ok) {
      const base = jsonPath(["events", index]);
      rejected.push({
        index,
        errors: parsed.errors.map((e) => ({ ...e, path: e.path.replace(/^\$/, base) })),
      });
      continue;
    }
    const mapped = mapShopifyPixelEvent(parsed.event);
    // Shopify's own event id: a re-sent event is stored once (hashed past 64 characters).
    const id = (await segmentEventId(parsed.event.id))!;
    built.push({ index, event: { id, ...mapped.event } });
    if (mapped.claim) claims.set(id, mapped.claim);
  }
  const { accepted, rejected: invalid } = validateBuiltEvents(
    built,
    deps.engine.checkEvent,
    "events",
  );
  const refused = [...rejected, ...invalid].sort((a, b) => a.index - b.index);
  // Whether a profile is identified is decided where the events are applied, under the profiles'
  // locks (apply_events.ts): an event naming one stores nothing and is dead-lettered with its
  // reason. The pixel never reads this answer, and a connected shop's request now costs what an
  // unknown shop's does.
  await acceptPixelEvents(deps, door, accepted);
  if (pixelShop) {
    const made = accepted.flatMap((a) => claims.get(a.event.id) ?? []);
    const ordersFound = await recordPixelClaims(deps.sql, pixelShop, made, deps.now());
    // The order came first (its webhook, or the backfill): the stitch runs once the visitor's
    // events are stored, the job retrying until then.
    for (const orderId of ordersFound) await queueStitch(deps.queue, shop, orderId);
  }
  return c.json({ accepted: accepted.length, rejected: refused, scope: shop }, 202);
}
