/**
 * The Segment (and RudderStack) Tracking API spec: its messages (track, identify, page, screen,
 * group, alias, and the batch envelope) parsed with zod into typed values, and each mapped to
 * the ingest events of our own catalog. The door is routes/segment.ts; the mapping table is in
 * docs/integrations.md ("Sending data with Segment or RudderStack SDKs").
 *
 * @module
 */
import { z } from "zod";
import type { EventSource, IngestEvent } from "../engine/engine.ts";
import type { ParsedIngestEvent } from "./edge.ts";
import { isStorableTimeStamp } from "./edge.ts";

/** One message's JSON size limit, as Segment's. */
export const MAX_SEGMENT_MESSAGE_BYTES = 32 * 1024;
/** One request's size limit (after inflation), as Segment's. */
export const MAX_SEGMENT_REQUEST_BYTES = 500 * 1024;

/** The catalog type of a `track` whose name is none of the e-commerce spec's names we map. */
export const SEGMENT_TRACK_TYPE = "track";
/** The catalog type of a `screen`. */
export const SEGMENT_SCREEN_TYPE = "screen_viewed";
/** The catalog type of an `alias`. */
export const SEGMENT_ALIAS_TYPE = "alias";

/** Segment's e-commerce spec v2 event names, and the catalog type each maps to. */
export const SEGMENT_TRACK_NAMES: Readonly<Record<string, string>> = {
  "Product Viewed": "product_viewed",
  "Product Clicked": "product_viewed",
  "Product List Viewed": "collection_viewed",
  "Product Added": "product_added_to_cart",
  "Product Removed": "product_removed_from_cart",
  "Cart Viewed": "cart_viewed",
  "Products Searched": "search_submitted",
  "Checkout Started": "checkout_started",
  "Payment Info Entered": "payment_info_submitted",
  "Order Completed": "checkout_completed",
  "Order Updated": "cart_updated",
  "Order Refunded": "refund_issued",
};

// An id as Segment's SDKs send it: a string, or a number (sent as is by some clients).
const _segmentId = z.union([z.string(), z.number().transform(String)])
  .pipe(z.string().min(1, "must not be empty"));
const _object = z.record(z.string(), z.unknown());
const _time = z.string().refine((s) => !Number.isNaN(Date.parse(s)), "must be an ISO 8601 time");

const _common = {
  messageId: _segmentId.optional(),
  userId: _segmentId.nullish(),
  anonymousId: _segmentId.nullish(),
  timestamp: _time.optional(),
  originalTimestamp: _time.optional(),
  sentAt: _time.optional(),
  receivedAt: z.unknown().optional(),
  context: _object.optional(),
  integrations: z.unknown().optional(),
  writeKey: z.unknown().optional(),
  channel: z.unknown().optional(),
  version: z.unknown().optional(),
  _metadata: z.unknown().optional(),
};

const _track = z.looseObject({
  ..._common,
  type: z.literal("track"),
  event: z.string().min(1).max(200),
  properties: _object.optional(),
});
const _identify = z.looseObject({
  ..._common,
  type: z.literal("identify"),
  traits: _object.optional(),
});
const _page = z.looseObject({
  ..._common,
  type: z.literal("page"),
  name: z.string().max(200).nullish(),
  category: z.string().max(200).nullish(),
  properties: _object.optional(),
});
const _screen = z.looseObject({
  ..._common,
  type: z.literal("screen"),
  name: z.string().max(200).nullish(),
  category: z.string().max(200).nullish(),
  properties: _object.optional(),
});
const _group = z.looseObject({
  ..._common,
  type: z.literal("group"),
  groupId: _segmentId,
  traits: _object.optional(),
});
const _alias = z.looseObject({
  ..._common,
  type: z.literal("alias"),
  previousId: _segmentId,
});

/** One Segment message, by its `type`. */
export const SegmentMessageSchema = z.discriminatedUnion("type", [
  _track,
  _identify,
  _page,
  _screen,
  _group,
  _alias,
]);

/** A parsed Segment message. */
export type SegmentMessage = z.output<typeof SegmentMessageSchema>;
/** A message's type. */
export type SegmentType = SegmentMessage["type"];

/** The types of the single-message routes, by path (long and analytics.js's short forms). */
export const SEGMENT_ROUTE_TYPES: Readonly<Record<string, SegmentType>> = {
  track: "track",
  t: "track",
  identify: "identify",
  i: "identify",
  page: "page",
  p: "page",
  screen: "screen",
  s: "screen",
  group: "group",
  g: "group",
  alias: "alias",
  a: "alias",
};

/** What a message became: the events to queue and the source they go under. */
export interface MappedMessage {
  /** `server` when the message names a user; `pixel` (an anonymous profile) otherwise. */
  source: EventSource;
  events: ParsedIngestEvent[];
}

/** What mapping needs besides the message. */
export interface MapOptions {
  /** When the request arrived (the base of the skew correction). */
  receivedAt: Date;
  /**
   * The engine's check of an event: a track mapped to a catalog type whose schema refuses its
   * properties (an `Order Refunded` without `order_id`) is stored as a `track` instead.
   */
  check?: (event: IngestEvent) => unknown;
}

/**
 * Parses one raw message (its `type` given by the route when the body has none) and maps it, or
 * answers why not: the problem as a path and a message.
 */
export function parseSegmentMessage(
  raw: unknown,
  options: MapOptions & { type?: SegmentType },
): { ok: true; message: SegmentMessage; mapped: MappedMessage } | {
  ok: false;
  errors: { path: string; message: string }[];
} {
  let input = raw;
  if (options.type && typeof raw === "object" && raw !== null && !Array.isArray(raw)) {
    // The route's type wins, as Segment's: /v1/track is a track whatever the body says.
    input = { ...raw, type: options.type };
  }
  const parsed = SegmentMessageSchema.safeParse(input);
  if (!parsed.success) {
    return {
      ok: false,
      errors: parsed.error.issues.map((issue) => ({
        path: ["$", ...issue.path.map(String)].join("."),
        message: issue.message,
      })),
    };
  }
  const mapped = mapSegmentMessage(parsed.data, options);
  return "error" in mapped
    ? { ok: false, errors: [{ path: mapped.path, message: mapped.error }] }
    : { ok: true, message: parsed.data, mapped };
}

// Our profile ids: at most 60 characters, no ':' (lib/ingest/edge.ts).
function _badId(id: string): string | null {
  if (id.length > 60) return "must be at most 60 characters";
  if (id.includes(":")) return "must not contain ':'";
  return null;
}

/**
 * Maps a parsed message to ingest events (see docs/integrations.md for the table): `userId` is
 * the profile (server), `anonymousId` alone an anonymous (pixel) profile, both (and an alias's
 * `previousId`) merge the anonymous profile into the user's through the event's `target`
 * profile, which the engine merges. The event's id is left to the caller (from `messageId`).
 */
export function mapSegmentMessage(
  message: SegmentMessage,
  options: MapOptions,
): MappedMessage | { path: string; error: string } {
  const userId = message.userId ?? undefined;
  const anonymousId = message.anonymousId ?? undefined;
  const profileId = userId ?? anonymousId;
  if (profileId === undefined) return { path: "$.userId", error: "userId or anonymousId required" };
  for (const [name, id] of [["userId", userId], ["anonymousId", anonymousId]] as const) {
    const bad = id === undefined ? null : _badId(id);
    if (bad) return { path: `$.${name}`, error: bad };
  }
  const timeStamp = segmentTimestamp(message, options.receivedAt);
  if (!isStorableTimeStamp(timeStamp)) {
    return { path: "$.timestamp", error: "must lie between years 0001 and 9999" };
  }
  const source: EventSource = userId !== undefined ? "server" : "pixel";
  // Merging needs a server identity: the engine never trusts a pixel event to merge.
  let other = userId !== undefined && anonymousId !== undefined && anonymousId !== userId
    ? anonymousId
    : undefined;
  const context = message.context;
  const base = (eventType: string, properties: Record<string, unknown>): ParsedIngestEvent => {
    const event: ParsedIngestEvent = { eventType, profileId, timeStamp, properties };
    if (other !== undefined) event.target = { itemId: other, itemType: "profile" };
    return event;
  };
  const withContext = (properties: Record<string, unknown>) =>
    context === undefined ? properties : { ...properties, context };
  switch (message.type) {
    case "track": {
      const props = message.properties ?? {};
      const mappedType = SEGMENT_TRACK_NAMES[message.event];
      const properties = withContext({
        ...props,
        ...(mappedType ? commerceProperties(props) : {}),
        event: message.event,
      });
      if (mappedType) {
        const event = base(mappedType, properties);
        if (!options.check?.({ id: "", ...event })) return { source, events: [event] };
      }
      return { source, events: [base(SEGMENT_TRACK_TYPE, properties)] };
    }
    case "page":
    case "screen": {
      const props = message.properties ?? {};
      const page = (context?.page ?? {}) as Record<string, unknown>;
      const pick = (key: string) => props[key] ?? page[key];
      const properties: Record<string, unknown> = { ...props };
      for (const key of ["url", "path", "title", "referrer", "search"]) {
        const value = pick(key);
        if (typeof value === "string") properties[key] = value;
      }
      if (message.name) properties.name = message.name;
      if (message.category) properties.category = message.category;
      const type = message.type === "page" ? "page_viewed" : SEGMENT_SCREEN_TYPE;
      return { source, events: [base(type, withContext(properties))] };
    }
    case "identify": {
      const bound = Object.keys(message.traits ?? {}).find((key) => _BOUND_TRAITS.has(key));
      if (bound) {
        return { path: `$.traits.${bound}`, error: "scope is bound to the API key; remove it" };
      }
      const update = identifyUpdate(message.traits ?? {});
      return { source, events: [base("updateProperties", { update })] };
    }
    case "group": {
      const update = {
        "properties.groupId": message.groupId,
        "properties.groupTraits": message.traits ?? {},
      };
      return { source, events: [base("updateProperties", { update })] };
    }
    case "alias": {
      if (userId === undefined) return { path: "$.userId", error: "alias needs a userId" };
      const bad = _badId(message.previousId);
      if (bad) return { path: "$.previousId", error: bad };
      other = message.previousId === userId ? undefined : message.previousId;
      return {
        source,
        events: [base(SEGMENT_ALIAS_TYPE, withContext({ previousId: message.previousId }))],
      };
    }
  }
}

/**
 * The event's time by Segment's rule: the client's `timestamp` (or RudderStack's
 * `originalTimestamp`) corrected for the client's clock skew, `receivedAt − (sentAt −
 * timestamp)`; without `sentAt`, the timestamp as sent; without either, `receivedAt`.
 */
export function segmentTimestamp(
  message: Pick<SegmentMessage, "timestamp" | "originalTimestamp" | "sentAt">,
  receivedAt: Date,
): string {
  const sent = message.timestamp ?? message.originalTimestamp;
  if (sent === undefined) return receivedAt.toISOString();
  const time = Date.parse(sent);
  if (message.sentAt === undefined) return new Date(time).toISOString();
  const skew = Date.parse(message.sentAt) - time;
  const corrected = new Date(receivedAt.getTime() - skew);
  return Number.isNaN(corrected.getTime()) ? new Date(time).toISOString() : corrected.toISOString();
}

// Profile properties the credential binds, which POST /cdp/events refuses too.
const _BOUND_TRAITS = new Set(["scope", "shopDomain", "source"]);

// Segment's reserved traits that are identity fields of ours.
const _IDENTITY_TRAITS: Readonly<Record<string, string>> = {
  email: "email",
  firstName: "firstName",
  first_name: "firstName",
  lastName: "lastName",
  last_name: "lastName",
  phone: "phoneNumber",
};
const _ADDRESS_TRAITS: Readonly<Record<string, string>> = {
  city: "city",
  country: "countryName",
  postalCode: "zipCode",
  postal_code: "zipCode",
};

/**
 * An identify's traits as an updateProperties `update` map: Segment's reserved traits mapped to
 * our identity fields (`phone` → `phoneNumber`, `address.city` → `city`, `address.country` →
 * `countryName`, `address.postalCode` → `zipCode`), the others under their own names.
 */
export function identifyUpdate(traits: Record<string, unknown>): Record<string, unknown> {
  const update: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(traits)) {
    if (value === undefined) continue;
    const field = _IDENTITY_TRAITS[key];
    if (field) {
      update[`properties.${field}`] = value;
      continue;
    }
    if (key === "address" && typeof value === "object" && value !== null) {
      for (const [part, partValue] of Object.entries(value)) {
        const mapped = _ADDRESS_TRAITS[part];
        if (mapped) update[`properties.${mapped}`] = partValue;
      }
    }
    update[`properties.${key}`] = value;
  }
  return update;
}

/**
 * The catalog's property names for Segment's e-commerce properties (`product_id` →
 * `productId`, `currency` → `currencyCode`, ...), added beside the properties as sent.
 */
export function commerceProperties(props: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const copy = (from: string, to: string) => {
    const value = props[from];
    if (typeof value === "string" || typeof value === "number") out[to] = value;
  };
  copy("product_id", "productId");
  copy("variant", "variantId");
  copy("name", "title");
  copy("order_id", "orderId");
  copy("checkout_id", "checkoutToken");
  copy("cart_id", "cartId");
  copy("list_id", "collectionId");
  copy("query", "query");
  if (typeof props.quantity === "number" && Number.isInteger(props.quantity)) {
    out.quantity = props.quantity;
  }
  if (typeof props.currency === "string") out.currencyCode = props.currency.toUpperCase();
  for (const key of ["price", "total", "revenue", "value"]) {
    const value = props[key];
    if (typeof value === "number") {
      if (key === "price") out.price = value;
      else out.totalPrice ??= value;
    }
  }
  if (typeof out.totalPrice === "number") out.amount = out.totalPrice;
  if (Array.isArray(props.products)) out.lineItemCount = props.products.length;
  return out;
}

/**
 * An event id from a message's `messageId`, so that a message sent twice is stored once (the
 * engine skips an event id it has stored). A messageId that is no valid event id (over 64
 * characters) is hashed; none at all: undefined (the caller mints one).
 */
export async function segmentEventId(messageId: string | undefined): Promise<string | undefined> {
  if (messageId === undefined) return undefined;
  if (messageId.length <= 64) return messageId;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(messageId));
  const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  return `sg_${hex.slice(0, 48)}`;
}
