/**
 * What the Shopify pixel's tests share: the documented sample events (tests/fixtures/shopify/
 * pixel_events.json) for a visitor, an HMAC-signed orders/create webhook for the sample's order,
 * and the forwarder with the pixel_stitch job.
 */
import assert from "node:assert/strict";
import { startForwarder } from "../../lib/ingest/forwarder.ts";
import { createPixelStitchJob } from "../../lib/shopify/pixel_claims.ts";
import { importWebhookKey, signShopifyWebhook } from "../../lib/shopify/webhooks.ts";
import { shopifyOrder } from "../lib/shopify/shopify_payloads.ts";
import type { TestContext } from "../test_support.ts";

export const SECRET = "shpss_0123456789abcdef0123456789abcdef";
export const ENV = { SHOPIFY_API_SECRET: SECRET };
export const VISITOR = "sh-5f2c9a1e-4A1B-4C2D-9E3F-0A1B2C3D4E5F";
export const ORDER_ID = 450789469;
export type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;

export const fixture = JSON.parse(
  await Deno.readTextFile(new URL("../fixtures/shopify/pixel_events.json", import.meta.url)),
) as { samples: { event: Record<string, unknown> }[] };

/** The fixture's events for a visitor (the documented samples; ids made the visitor's own). */
export function visit(clientId = VISITOR, patch: (e: Record<string, unknown>) => void = () => {}) {
  return fixture.samples.map(({ event }) => {
    const copy = structuredClone(event);
    copy.clientId = clientId;
    if (clientId !== VISITOR) copy.id = `${clientId}-${event.seq}`;
    patch(copy);
    return copy;
  });
}

/** Posts events to the door as the pixel does (text/plain JSON, the shop's Origin). */
export function send(ctx: TestContext, shop: string, events: unknown[], headers = {}) {
  return ctx.app.request(`/cdp/ingest/shopify?shop=${encodeURIComponent(shop)}`, {
    method: "POST",
    // What the sandbox's sendBeacon and the pixel's fetch send: JSON as text/plain.
    headers: { "Content-Type": "text/plain", Origin: `https://${shop}`, ...headers },
    body: JSON.stringify({ events }),
  });
}

let _webhooks = 0;
/** Delivers orders/create for the sample's order (Bob), signed as Shopify signs it. */
export async function orderWebhook(
  ctx: TestContext,
  shop: string,
  extra: Record<string, unknown> = {},
) {
  const body = JSON.stringify(shopifyOrder({
    id: ORDER_ID,
    admin_graphql_api_id: `gid://shopify/Order/${ORDER_ID}`,
    email: "bob.norman@example.com",
    contact_email: "bob.norman@example.com",
    customer: { id: 207119551, email: "Bob.Norman@example.com", first_name: "Bob" },
    ...extra,
  }));
  const res = await ctx.app.request("/webhooks/shopify", {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      "X-Shopify-Topic": "orders/create",
      "X-Shopify-Shop-Domain": shop,
      "X-Shopify-Webhook-Id": `wh-pixel-${Deno.pid}-${++_webhooks}`,
      "X-Shopify-Hmac-Sha256": await signShopifyWebhook(
        await importWebhookKey(SECRET),
        new TextEncoder().encode(body),
      ),
    },
    body,
  });
  assert.equal(res.status, 200, await res.clone().text());
  return res;
}

/** The forwarder with the pixel_stitch job, as the runtime starts it. */
export function forwarder(ctx: TestContext) {
  return startForwarder({
    queue: ctx.queue,
    engine: ctx.deps.engine,
    now: ctx.clock.now,
    jobs: { pixel_stitch: createPixelStitchJob({ sql: ctx.sql, now: ctx.clock.now }) },
  });
}
