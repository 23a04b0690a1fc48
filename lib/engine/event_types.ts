/**
 * The event-type registry: the types the service accepts, their JSON schemas and who may send
 * them, and the catalog entries the API shows.
 *
 * @module
 */
import { z } from "zod";

/** Where an event type comes from and who may send it. */
export type EventCategory = "pixel" | "server" | "identity" | "native";

/** One property an event type's `properties` object may carry. */
interface _PropertySpec {
  description: string;
  schema: z.ZodType;
  required?: boolean;
}

/** A built-in event type: the catalog entry and the schema ingest validates against. */
export interface EventTypeDefinition {
  name: string;
  category: EventCategory;
  title: string;
  description: string;
  version: string;
  properties: Record<string, _PropertySpec>;
}

/** A catalog entry of `GET /cdp/events/types`. */
export interface EventTypeSummary {
  name: string;
  source: "built-in" | "custom";
  title: string;
  description: string;
  schema: {
    $id: string;
    version: string;
    required: string[];
    properties: Record<string, string>;
  };
}

const _text = z.string().max(2048);
const _id = z.union([z.string().min(1).max(255), z.number().int()]);
const _money = z.union([z.number(), z.string().regex(/^-?\d+(\.\d+)?$/)]);
const _currency = z.string().regex(/^[A-Z]{3}$/);

function _p(description: string, schema: z.ZodType, required = false): _PropertySpec {
  return { description, schema, required };
}

const _page = {
  url: _p("Full URL of the page", _text),
  title: _p("Document title", _text),
  referrer: _p("Referring URL", _text),
};
const _product = {
  productId: _p("Storefront product id", _id),
  variantId: _p("Storefront variant id", _id),
  title: _p("Product title", _text),
  price: _p("Unit price", _money),
  currencyCode: _p("ISO 4217 currency code", _currency),
  quantity: _p("Quantity", z.number().int().min(0)),
};
const _checkout = {
  checkoutToken: _p("Storefront checkout token", _text),
  totalPrice: _p("Checkout total", _money),
  currencyCode: _p("ISO 4217 currency code", _currency),
  lineItemCount: _p("Number of line items", z.number().int().min(0)),
};
const _order = {
  orderId: _p("Storefront order id", _id, true),
  orderNumber: _p("Human-facing order number", _text),
  total: _p("Order total", _money),
  currencyCode: _p("ISO 4217 currency code", _currency),
  customerId: _p("Storefront customer id", _id),
  lineItems: _p(
    "Line items: productId, variantId, title, quantity, price",
    z.array(z.object({}).loose()),
  ),
};

function _def(
  name: string,
  category: EventCategory,
  title: string,
  description: string,
  properties: Record<string, _PropertySpec>,
): EventTypeDefinition {
  return { name, category, title, description, version: "1.0.0", properties };
}

/** Every built-in event type. */
export const EVENT_TYPES: readonly EventTypeDefinition[] = [
  // Storefront pixel events (Shopify's standard Web Pixels events).
  _def("page_viewed", "pixel", "Page viewed", "A storefront page was viewed.", _page),
  _def("product_viewed", "pixel", "Product viewed", "A product detail page was viewed.", {
    ..._product,
    url: _page.url,
  }),
  _def("collection_viewed", "pixel", "Collection viewed", "A collection page was viewed.", {
    collectionId: _p("Storefront collection id", _id),
    title: _p("Collection title", _text),
    url: _page.url,
  }),
  _def(
    "product_added_to_cart",
    "pixel",
    "Product added to cart",
    "A product variant was added to the cart.",
    { ..._product, cartId: _p("Cart id", _text) },
  ),
  _def(
    "product_removed_from_cart",
    "pixel",
    "Product removed from cart",
    "A product variant was removed from the cart.",
    { ..._product, cartId: _p("Cart id", _text) },
  ),
  _def("cart_viewed", "pixel", "Cart viewed", "The cart page was viewed.", {
    cartId: _p("Cart id", _text),
    totalPrice: _checkout.totalPrice,
    currencyCode: _checkout.currencyCode,
    lineItemCount: _checkout.lineItemCount,
  }),
  _def("search_submitted", "pixel", "Search submitted", "A storefront search was run.", {
    query: _p("Search terms", _text, true),
    resultCount: _p("Number of results", z.number().int().min(0)),
  }),
  _def("checkout_started", "pixel", "Checkout started", "The buyer began checkout.", _checkout),
  _def(
    "checkout_contact_info_submitted",
    "pixel",
    "Checkout contact info submitted",
    "The buyer submitted contact details during checkout.",
    _checkout,
  ),
  _def(
    "checkout_address_info_submitted",
    "pixel",
    "Checkout address info submitted",
    "The buyer submitted an address during checkout.",
    _checkout,
  ),
  _def(
    "checkout_shipping_info_submitted",
    "pixel",
    "Checkout shipping info submitted",
    "The buyer chose a shipping method during checkout.",
    _checkout,
  ),
  _def(
    "payment_info_submitted",
    "pixel",
    "Payment info submitted",
    "The buyer submitted payment details during checkout.",
    _checkout,
  ),
  _def("checkout_completed", "pixel", "Checkout completed", "The buyer completed checkout.", {
    ..._checkout,
    orderId: _p("Storefront order id", _id),
  }),
  // Server-side commerce events.
  _def("order_created", "server", "Order created", "An order was placed.", _order),
  _def(
    "checkout_abandoned",
    "server",
    "Checkout abandoned",
    "A checkout was left unfinished past the abandonment delay.",
    { ..._checkout, abandonedAt: _p("When the checkout was deemed abandoned", z.iso.datetime()) },
  ),
  _def(
    "checkout_recovered",
    "server",
    "Checkout recovered",
    "An abandoned checkout was completed after a recovery message.",
    {
      ..._checkout,
      orderId: _order.orderId,
      recoveredAt: _p("When it was recovered", z.iso.datetime()),
    },
  ),
  _def("customer_updated", "server", "Customer updated", "A storefront customer record changed.", {
    customerId: _p("Storefront customer id", _id, true),
    email: _p("Email address", z.string().max(320)),
    phone: _p("Phone number", z.string().max(32)),
    acceptsMarketing: _p("Marketing consent", z.boolean()),
  }),
  _def("consent_updated", "server", "Consent updated", "A customer's consent changed.", {
    consentType: _p(
      "What the consent covers: email_marketing, sms_marketing, analytics",
      _text,
      true,
    ),
    state: _p("granted, denied or revoked", z.enum(["granted", "denied", "revoked"]), true),
    optInLevel: _p("single_opt_in, confirmed_opt_in or unknown", _text),
    updatedAt: _p("When the consent changed", z.iso.datetime()),
  }),
  _def(
    "subscription_changed",
    "server",
    "Subscription changed",
    "A subscription contract was created, paused, resumed or cancelled.",
    {
      subscriptionId: _p("Subscription contract id", _id, true),
      status: _p("active, paused, cancelled, expired or failed", _text, true),
      nextBillingDate: _p("Next billing date", _text),
    },
  ),
  _def("refund_issued", "server", "Refund issued", "A refund was issued on an order.", {
    orderId: _order.orderId,
    refundId: _p("Refund id", _id),
    amount: _p("Refunded amount", _money),
    currencyCode: _order.currencyCode,
  }),
  _def("cart_updated", "server", "Cart updated", "A cart's contents changed.", {
    cartId: _p("Cart id", _text, true),
    totalPrice: _checkout.totalPrice,
    currencyCode: _checkout.currencyCode,
    lineItemCount: _checkout.lineItemCount,
  }),
  _def(
    "fulfillment_updated",
    "server",
    "Fulfillment updated",
    "A fulfillment of an order changed status.",
    {
      orderId: _order.orderId,
      fulfillmentId: _p("Fulfillment id", _id),
      status: _p("Fulfillment status", _text),
      trackingNumber: _p("Carrier tracking number", _text),
    },
  ),
  // Segment Tracking API events without a catalog type of their own (routes/segment.ts).
  _def(
    "track",
    "server",
    "Tracked event",
    "A Segment or RudderStack `track` whose name has no catalog type; `event` holds its name.",
    { event: _p("The event's name as sent (`Signed Up`)", z.string().min(1).max(200), true) },
  ),
  _def("screen_viewed", "server", "Screen viewed", "A mobile app screen was viewed (Segment).", {
    name: _p("Screen name", _text),
    category: _p("Screen category", _text),
  }),
  _def(
    "alias",
    "server",
    "Alias",
    "A Segment `alias`: previousId's profile merged into this one (the event's target).",
    { previousId: _p("The id merged into this profile", z.string().min(1).max(60), true) },
  ),
  // Identity and native (Apache Unomi) events.
  _def(
    "updateProperties",
    "identity",
    "Update profile properties",
    "Sets, adds or removes profile properties (identity fields included), as in Apache Unomi.",
    {
      update: _p(
        "Map of properties.<name> to a new value (null removes it)",
        z.record(z.string(), z.unknown()),
      ),
      add: _p("Map of properties.<name> to values to add", z.record(z.string(), z.unknown())),
      delete: _p("Map of properties.<name> to values to remove", z.record(z.string(), z.unknown())),
      targetId: _p("The profile to update (the event's own profile)", z.string().max(60)),
      targetType: _p("Always `profile`", z.literal("profile")),
    },
  ),
  _def("view", "native", "View", "A generic page or screen view (Apache Unomi native type).", {
    ..._page,
    pageInfo: _p("Unomi page info object", z.object({}).loose()),
  }),
  _def(
    "modifyConsent",
    "native",
    "Modify consent",
    "Grants or revokes a consent type (Apache Unomi native type).",
    {
      consent: _p(
        "typeIdentifier, status (GRANTED, DENIED, REVOKED), statusDate, revokeDate",
        z.object({
          typeIdentifier: z.string().min(1).max(128),
          status: z.enum(["GRANTED", "DENIED", "REVOKED"]),
        }).loose(),
        true,
      ),
    },
  ),
];

/** The built-in type of that name, or undefined. */
export function findEventType(name: string): EventTypeDefinition | undefined {
  return _byName.get(name);
}

/** The catalog entry of a definition. */
export function eventTypeSummary(def: EventTypeDefinition): EventTypeSummary {
  const properties: Record<string, string> = {
    eventType: `Constant: ${def.name}`,
    profileId: "Profile the event belongs to (max 60 characters, no ':')",
    sessionId: "Session id (max 60 characters, no ':'); server-generated when absent",
    timeStamp: "ISO 8601 time of the event; defaults to the time of forwarding",
    target: "Optional { itemId, itemType, properties } the event is about",
  };
  const required = ["eventType", "profileId"];
  for (const [name, spec] of Object.entries(def.properties)) {
    properties[`properties.${name}`] = spec.description;
    if (spec.required) required.push(`properties.${name}`);
  }
  return {
    name: def.name,
    source: "built-in",
    title: def.title,
    description: def.description,
    schema: {
      $id: `urn:cdp:schema:event:${def.name}:${def.version}`,
      version: def.version,
      required,
      properties,
    },
  };
}

/** The zod schema ingest validates an event's `properties` against (extra keys are allowed). */
export function eventPropertiesSchema(def: EventTypeDefinition): z.ZodType {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, spec] of Object.entries(def.properties)) {
    shape[name] = spec.required ? spec.schema : spec.schema.optional();
  }
  return z.object(shape).loose();
}

const _byName = new Map(EVENT_TYPES.map((def) => [def.name, def]));

/**
 * Checks an event's `properties` against its type's schema. Returns null when valid, else a
 * bounded diagnostic (at most three problems, 500 characters).
 */
export function checkEventProperties(
  def: EventTypeDefinition,
  properties: Record<string, unknown>,
): string | null {
  const parsed = _schemaCache(def).safeParse(properties);
  if (parsed.success) return null;
  const problems = parsed.error.issues.slice(0, 3).map((issue) =>
    `properties${issue.path.map((p) => `.${String(p)}`).join("")}: ${issue.message}`
  );
  return problems.join("; ").slice(0, 500);
}

const _schemas = new Map<string, z.ZodType>();

function _schemaCache(def: EventTypeDefinition): z.ZodType {
  let schema = _schemas.get(def.name);
  if (!schema) _schemas.set(def.name, schema = eventPropertiesSchema(def));
  return schema;
}

/**
 * Bumped by hand whenever a check changes in a way the catalog below does not show (a property's
 * zod constraint, the updateProperties rules): a message checked under an older version is then
 * checked again by the engine.
 */
const _CHECK_REVISION = 1;

/**
 * The version of the event checks ({@linkcode checkEventProperties} and the registry): the hand
 * revision and a digest of the catalog (names, required and typed properties). The edge stamps a
 * batch it checked with it; the forwarder re-checks a batch only under another version.
 */
export const EVENT_REGISTRY_VERSION = `${_CHECK_REVISION}.${
  _fnv1a(JSON.stringify(EVENT_TYPES.map(eventTypeSummary)))
}`;

function _fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(36);
}
