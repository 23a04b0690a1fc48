// The storefront pixel's code, shared by the app web pixel extension (index.ts hands it the API
// that `register` receives) and the custom pixel (`deno task admin pixel --brand ID` prints this
// file with a call to startPixel for Settings → Customer events). Plain JavaScript, because a
// custom pixel is pasted as it is, and no DOM, `window` or `navigator`: Shopify's strict sandbox
// is a Web Worker. Everything it sends is documented in docs/shopify_pixel.md.

/** Events per request at most (the service's bound). */
export const PIXEL_MAX_BATCH = 20;
// The service takes 64 KB per request; a batch is cut well below it.
const PIXEL_MAX_BODY_CHARS = 48_000;
// Events of one burst (a page load sends page_viewed and product_viewed together) go together.
const PIXEL_FLUSH_MS = 250;

/** The standard events the service stores (its catalog types of the same names). */
export const PIXEL_EVENTS = [
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
];

/**
 * Starts the pixel: subscribes to Shopify's standard events and sends the ones the service
 * stores, trimmed, to POST /cdp/ingest/shopify, while the visitor allows analytics.
 * @param {{analytics: any, browser: any, init: any, customerPrivacy?: any,
 *   settings: {serviceUrl: string}}} api
 */
export function startPixel({ analytics, browser, init, customerPrivacy, settings }) {
  const shop = init.data.shop.myshopifyDomain;
  const endpoint = `${String(settings.serviceUrl).replace(/\/+$/, "")}/cdp/ingest/shopify?shop=${
    encodeURIComponent(shop)
  }`;
  // Consent as Shopify passes it: the state when the page loaded, then every change. Nothing is
  // sent (or kept waiting) while analytics processing is not allowed.
  let allowed = init.customerPrivacy?.analyticsProcessingAllowed === true;
  const waiting = [];
  let timer = null;
  customerPrivacy?.subscribe?.("visitorConsentCollected", (event) => {
    allowed = event?.customerPrivacy?.analyticsProcessingAllowed === true;
    if (!allowed) waiting.length = 0;
  });

  const send = (body) => {
    // fetch with keepalive outlives the page, as sendBeacon does; text/plain needs no preflight.
    if (typeof fetch === "function") {
      return fetch(endpoint, {
        method: "POST",
        body,
        keepalive: true,
        headers: { "Content-Type": "text/plain" },
      }).catch(() => browser.sendBeacon(endpoint, body));
    }
    return browser.sendBeacon(endpoint, body);
  };
  const flush = () => {
    timer = null;
    while (waiting.length > 0) {
      const batch = [];
      let size = 0;
      while (waiting.length > 0 && batch.length < PIXEL_MAX_BATCH) {
        const length = JSON.stringify(waiting[0]).length;
        if (batch.length > 0 && size + length > PIXEL_MAX_BODY_CHARS) break;
        batch.push(waiting.shift());
        size += length;
      }
      send(JSON.stringify({ events: batch }));
    }
  };

  analytics.subscribe("all_standard_events", (event) => {
    if (!allowed || !PIXEL_EVENTS.includes(event.name)) return;
    waiting.push(trimEvent(event));
    // A completed checkout leaves the page soon after: it goes at once.
    if (waiting.length >= PIXEL_MAX_BATCH || event.name === "checkout_completed") flush();
    else if (timer === null) timer = setTimeout(flush, PIXEL_FLUSH_MS);
  });
}

/** A standard event with only what the service stores (no images, addresses or phone). */
export function trimEvent(event) {
  const document = event.context?.document;
  const navigator = event.context?.navigator;
  return {
    id: event.id,
    name: event.name,
    timestamp: event.timestamp,
    clientId: event.clientId,
    context: {
      document: {
        location: {
          href: document?.location?.href,
          pathname: document?.location?.pathname,
          search: document?.location?.search,
        },
        referrer: document?.referrer,
        title: document?.title,
      },
      navigator: { userAgent: navigator?.userAgent, language: navigator?.language },
    },
    data: trimData(event.data ?? {}),
  };
}

function trimData(data) {
  const out = {};
  if (data.productVariant) out.productVariant = trimVariant(data.productVariant);
  if (data.collection) {
    out.collection = {
      id: data.collection.id,
      title: data.collection.title,
      productVariants: (data.collection.productVariants ?? []).map((v) => ({ id: v?.id })),
    };
  }
  if (data.searchResult) {
    out.searchResult = {
      query: data.searchResult.query,
      productVariants: (data.searchResult.productVariants ?? []).map((v) => ({ id: v?.id })),
    };
  }
  if (data.cartLine) out.cartLine = trimLine(data.cartLine);
  if (data.cart) {
    out.cart = {
      id: data.cart.id,
      cost: data.cart.cost,
      totalQuantity: data.cart.totalQuantity,
      lines: (data.cart.lines ?? []).map(trimLine),
    };
  }
  const checkout = data.checkout;
  if (checkout) {
    out.checkout = {
      token: checkout.token,
      // Only to match the order Shopify sends; never stored with the events.
      email: checkout.email,
      currencyCode: checkout.currencyCode,
      totalPrice: checkout.totalPrice,
      subtotalPrice: checkout.subtotalPrice,
      lineItems: (checkout.lineItems ?? []).map((item) => ({
        title: item?.title,
        quantity: item?.quantity,
        finalLinePrice: item?.finalLinePrice,
        variant: trimVariant(item?.variant),
      })),
      order: checkout.order
        ? { id: checkout.order.id, customer: { id: checkout.order.customer?.id } }
        : null,
    };
  }
  return out;
}

function trimLine(line) {
  return {
    quantity: line?.quantity,
    cost: line?.cost,
    merchandise: trimVariant(line?.merchandise),
  };
}

function trimVariant(variant) {
  if (!variant) return null;
  const product = variant.product;
  return {
    id: variant.id,
    title: variant.title,
    sku: variant.sku,
    price: variant.price,
    product: product
      ? { id: product.id, title: product.title, vendor: product.vendor, type: product.type }
      : null,
  };
}
