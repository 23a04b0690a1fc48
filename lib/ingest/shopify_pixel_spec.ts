/**
 * Shopify's Web Pixels standard events (as `analytics.subscribe("all_standard_events")` delivers
 * them: `id`, `name`, `timestamp`, `clientId`, `context`, `data`) parsed with zod and mapped to
 * the catalog type of the same name. The door is `POST /cdp/ingest/shopify` (routes/ingest.ts);
 * the mapping table is in docs/shopify_pixel.md. Also the claim a `checkout_completed` makes
 * ("this visitor placed order N"), which lib/shopify/pixel_claims.ts confirms against Shopify's
 * own orders before it links anything.
 *
 * @module
 */
import { z } from "zod";
import type { IngestEvent } from "../engine/engine.ts";

/** The standard events the door accepts, each mapped to the catalog type of the same name. */
export const SHOPIFY_PIXEL_EVENTS = [
  "page_viewed",
  "product_viewed",
  "collection_viewed",
  "search_submitted",
  "product_added_to_cart",
  "product_removed_from_cart",
  "cart_viewed",
  "checkout_started",
  "checkout_contact_info_submitted",
  "checkout_address_info_submitted",
  "checkout_shipping_info_submitted",
  "payment_info_submitted",
  "checkout_completed",
] as const;

/** A standard event's name. */
export type ShopifyPixelEventName = typeof SHOPIFY_PIXEL_EVENTS[number];

/** The `library` stamped in every event's `properties.context`. */
export const SHOPIFY_PIXEL_LIBRARY = { name: "shopify-web-pixel", version: "1.0.0" } as const;

const _object = z.record(z.string(), z.unknown());
const _time = z.string().max(64).refine(
  (s) => !Number.isNaN(Date.parse(s)),
  "must be an ISO 8601 time",
);

/** One standard event as Shopify documents it (unknown members are ignored, never stored). */
export const ShopifyPixelEventSchema = z.looseObject({
  id: z.string().min(1).max(128),
  name: z.enum(SHOPIFY_PIXEL_EVENTS, {
    error: `name must be one of Shopify's standard events (${SHOPIFY_PIXEL_EVENTS.join(", ")})`,
  }),
  timestamp: _time,
  // A profile id: at most 60 characters, no ':' (as every door's), never a server identity's.
  clientId: z.string().min(1).max(60).regex(/^[^:]*$/, "must not contain ':'")
    .refine((s) => !s.startsWith("store_"), "ids starting with store_ are reserved"),
  context: _object.optional(),
  data: _object.optional(),
});

/** A parsed standard event. */
export type ShopifyPixelEvent = z.output<typeof ShopifyPixelEventSchema>;

/** "This visitor placed that order": what a `checkout_completed` says, unverified. */
export interface PixelClaim {
  clientId: string;
  /** The order's number in Shopify's ids (`gid://shopify/OrderIdentity/N` → `N`). */
  orderId: string;
  /** The checkout's email, normalized to lower case, when the event carried one. */
  email: string | null;
}

/** A mapped event (without its server id: the door sets it from the event's own id). */
export interface MappedPixelEvent {
  event: Omit<IngestEvent, "id">;
  claim: PixelClaim | null;
}

/** Parses one event: the typed event, or the problems with their JSON paths under `$`. */
export function parseShopifyPixelEvent(
  raw: unknown,
): { ok: true; event: ShopifyPixelEvent } | {
  ok: false;
  errors: { path: string; message: string }[];
} {
  const parsed = ShopifyPixelEventSchema.safeParse(raw);
  if (parsed.success) return { ok: true, event: parsed.data };
  return {
    ok: false,
    errors: parsed.error.issues.map((issue) => ({
      path: ["$", ...issue.path.map((p) => typeof p === "number" ? `[${p}]` : `.${String(p)}`)]
        .join(""),
      message: issue.message,
    })),
  };
}

/** Maps a parsed standard event to our event (profile = `clientId`) and its claim, if any. */
export function mapShopifyPixelEvent(event: ShopifyPixelEvent): MappedPixelEvent {
  const data = event.data ?? {};
  const context = pixelContext(event.context);
  const url = context.page?.url;
  let properties: Record<string, unknown>;
  let claim: PixelClaim | null = null;
  switch (event.name) {
    case "page_viewed":
      properties = {
        url,
        path: context.page?.path,
        search: context.page?.search,
        title: context.page?.title,
        referrer: context.page?.referrer,
      };
      break;
    case "product_viewed":
      properties = { ...variantProperties(_record(data.productVariant)), url };
      break;
    case "collection_viewed": {
      const collection = _record(data.collection);
      const variants = _array(collection?.productVariants);
      properties = {
        collectionId: shopifyNumericId(collection?.id),
        title: _text(collection?.title),
        productCount: variants?.length,
        url,
      };
      break;
    }
    case "search_submitted": {
      const result = _record(data.searchResult);
      properties = {
        query: _text(result?.query),
        resultCount: _array(result?.productVariants)?.length,
      };
      break;
    }
    case "product_added_to_cart":
    case "product_removed_from_cart": {
      const line = _record(data.cartLine);
      const total = _money(_record(line?.cost)?.totalAmount);
      properties = {
        ...variantProperties(_record(line?.merchandise)),
        quantity: _count(line?.quantity),
        lineTotal: total?.amount,
      };
      break;
    }
    case "cart_viewed": {
      const cart = _record(data.cart);
      const total = _money(_record(cart?.cost)?.totalAmount);
      const lines = _array(cart?.lines)?.map((l) => {
        const line = _record(l);
        return _defined({
          ...variantProperties(_record(line?.merchandise)),
          quantity: _count(line?.quantity),
        });
      });
      properties = {
        cartId: _text(cart?.id),
        totalPrice: total?.amount,
        currencyCode: total?.currencyCode,
        lineItemCount: lines?.length,
        totalQuantity: _count(cart?.totalQuantity),
        lines,
      };
      break;
    }
    default: {
      // The checkout events: the checkout's totals and lines; checkout_completed adds its order.
      const checkout = _record(data.checkout);
      const total = _money(checkout?.totalPrice);
      const lines = _array(checkout?.lineItems)?.map((l) => {
        const line = _record(l);
        return _defined({
          ...variantProperties(_record(line?.variant)),
          title: _text(line?.title),
          quantity: _count(line?.quantity),
          lineTotal: _money(line?.finalLinePrice)?.amount,
        });
      });
      properties = {
        checkoutToken: _text(checkout?.token),
        totalPrice: total?.amount,
        subtotalPrice: _money(checkout?.subtotalPrice)?.amount,
        currencyCode: total?.currencyCode ?? _currency(checkout?.currencyCode),
        lineItemCount: lines?.length,
        lines,
      };
      if (event.name === "checkout_completed") {
        const order = _record(checkout?.order);
        const orderId = shopifyNumericId(order?.id);
        properties.orderId = orderId;
        properties.customerId = shopifyNumericId(_record(order?.customer)?.id);
        if (orderId) {
          const email = _text(checkout?.email)?.trim().toLowerCase() || null;
          claim = { clientId: event.clientId, orderId, email };
        }
      }
    }
  }
  return {
    event: {
      eventType: event.name,
      profileId: event.clientId,
      timeStamp: new Date(Date.parse(event.timestamp)).toISOString(),
      properties: _defined({ ...properties, context }),
    },
    claim,
  };
}

/**
 * The request context in Segment's shape (`page`, `userAgent`, `locale`, `library`) from a
 * pixel event's `context.document` and `context.navigator` (the sessions' source).
 */
export function pixelContext(context: Record<string, unknown> | undefined): {
  page?: { url?: string; path?: string; search?: string; referrer?: string; title?: string };
  userAgent?: string;
  locale?: string;
  library: typeof SHOPIFY_PIXEL_LIBRARY;
} {
  const document = _record(context?.document);
  const location = _record(document?.location);
  const navigator = _record(context?.navigator);
  const page = _defined({
    url: _text(location?.href),
    path: _text(location?.pathname),
    search: _text(location?.search),
    referrer: _text(document?.referrer),
    title: _text(document?.title),
  });
  return _defined({
    page: Object.keys(page).length > 0 ? page : undefined,
    userAgent: _text(navigator?.userAgent),
    locale: _text(navigator?.language),
    library: SHOPIFY_PIXEL_LIBRARY,
  }) as ReturnType<typeof pixelContext>;
}

/**
 * The number of a Shopify id: `gid://shopify/OrderIdentity/450789469`, `gid://shopify/Product/7`
 * or the bare number (string or number) → `"450789469"`; anything else → undefined.
 */
export function shopifyNumericId(value: unknown): string | undefined {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value !== "string") return undefined;
  const match = /^(?:gid:\/\/shopify\/[A-Za-z]+\/)?(\d{1,20})$/.exec(value.trim());
  return match?.[1];
}

/** A product variant's segmentable fields (ids, titles, price and currency). */
function variantProperties(variant: Record<string, unknown> | undefined): Record<string, unknown> {
  const product = _record(variant?.product);
  const price = _money(variant?.price);
  return _defined({
    productId: shopifyNumericId(product?.id),
    variantId: shopifyNumericId(variant?.id),
    title: _text(product?.title),
    variantTitle: _text(variant?.title),
    sku: _text(variant?.sku),
    vendor: _text(product?.vendor),
    productType: _text(product?.type),
    price: price?.amount,
    currencyCode: price?.currencyCode,
  });
}

function _money(value: unknown): { amount: number; currencyCode?: string } | undefined {
  const money = _record(value);
  const amount = money?.amount;
  if (typeof amount !== "number" || !Number.isFinite(amount)) return undefined;
  return { amount, currencyCode: _currency(money?.currencyCode) };
}

function _currency(value: unknown): string | undefined {
  return typeof value === "string" && /^[A-Za-z]{3}$/.test(value) ? value.toUpperCase() : undefined;
}

function _count(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

function _text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value.slice(0, 2048) : undefined;
}

function _record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}

function _array(value: unknown): unknown[] | undefined {
  return Array.isArray(value) ? value : undefined;
}

// Leaves out the members without a value, so that stored properties hold only what was sent.
function _defined<T extends Record<string, unknown>>(value: T): T {
  // A plain loop: entries, filter and fromEntries allocate an array per member, for every event.
  const kept: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    if (value[key] !== undefined) kept[key] = value[key];
  }
  return kept as T;
}
