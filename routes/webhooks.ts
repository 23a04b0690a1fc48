/**
 * The Shopify webhook route (`POST /webhooks/shopify`): the signature and headers are
 * checked here, the delivery is applied by lib/shopify/webhooks.ts.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { AppDeps } from "../lib/http/app_env.ts";
import { parseShopDomain } from "../lib/tenancy/brands.ts";
import { HttpError } from "../lib/http/errors.ts";
import { errorResponses, newRouter, noSecurity } from "../lib/http/openapi.ts";
import { parseShopifyJson } from "../lib/shopify/order_mapping.ts";
import {
  applyWebhook,
  importWebhookKey,
  ORDER_TOPICS,
  verifyShopifyHmac,
  WEBHOOK_TOPICS,
} from "../lib/shopify/webhooks.ts";
import { recordWebhookReceipt } from "../lib/shopify/webhook_receipts.ts";
import { queueStitchIfClaimed } from "../lib/shopify/pixel_claims.ts";
import { shopifyNumericId } from "../lib/ingest/shopify_pixel_spec.ts";

// Documented, never rejected here: the signature is checked before any header is judged.
const _header = (example: string, description: string) =>
  z.string().optional().openapi({ example, description });

const shopifyWebhook = createRoute({
  operationId: "receiveShopifyWebhook",
  method: "post",
  path: "/webhooks/shopify",
  tags: ["Webhooks"],
  summary: "Shopify webhooks (signed with the app secret, no credential)",
  description: "The body is authenticated by `X-Shopify-Hmac-Sha256`, the base64 HMAC-SHA256 " +
    "of the raw body with `SHOPIFY_API_SECRET` (constant-time comparison); a bad or missing " +
    "signature is 401 and changes nothing, checked before anything else is looked at. A " +
    "repeated `X-Shopify-Webhook-Id` is acknowledged and not applied twice. A delivery belongs " +
    "to one shop: a webhook id or a signed body already delivered for another shop, or a " +
    "payload naming another shop (`shop_domain`, `myshopify_domain`, the `*.myshopify.com` " +
    "host of `order_status_url`), is 400 and changes nothing. Topics with an " +
    `effect: ${WEBHOOK_TOPICS.join(", ")}; others, and shops that are not integrations, are ` +
    "acknowledged (200) and ignored, since Shopify retries any other answer for 48 hours.",
  security: noSecurity,
  request: {
    headers: z.object({
      "x-shopify-topic": _header("orders/create", "The webhook topic"),
      "x-shopify-shop-domain": _header("acme.myshopify.com", "The shop it concerns"),
      "x-shopify-webhook-id": _header(
        "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        "The delivery's id, the same on every retry",
      ),
      "x-shopify-hmac-sha256": _header(
        "XWmrwMey6OsLMeiZKwP4FppHH3cmAiiJJAweH5Jo4bM=",
        "base64 HMAC-SHA256 of the raw body with the app secret",
      ),
    }),
    body: {
      required: true,
      description: "The topic's Shopify payload (REST shape)",
      // Not a zod schema: the raw bytes must reach the handler unparsed for the signature.
      content: {
        "application/json": {
          schema: { type: "object" } as never,
          example: {
            id: 820982911946154500,
            name: "#1001",
            email: "bob@example.com",
            created_at: "2026-11-21T12:00:00-05:00",
            updated_at: "2026-11-21T12:00:00-05:00",
            currency: "USD",
            total_price: "199.00",
            financial_status: "paid",
            customer: { id: 207119551, email: "bob@example.com" },
            line_items: [{
              product_id: 632910392,
              title: "IPod Nano",
              quantity: 1,
              price: "199.00",
            }],
          },
        },
      },
    },
  },
  responses: {
    200: {
      description: "Acknowledged: applied, a duplicate, stale, or ignored",
      content: {
        "application/json": {
          schema: z.object({
            received: z.literal(true),
            outcome: z.enum(["applied", "duplicate", "stale", "ignored"]),
            reason: z.enum([
              "unknown_shop",
              "unsupported_topic",
              "integration_disconnected",
              "no_identifier",
            ]).optional(),
            privacy_request_id: z.string().optional().openapi({
              description: "customers/redact, customers/data_request: the erase or export " +
                "request recorded (GET /cdp/privacy/requests/{id})",
            }),
          }),
          example: { received: true, outcome: "applied" },
        },
      },
    },
    ...errorResponses(400, 401, 405, 408, 413, 503),
  },
});

/** POST /webhooks/shopify. */
export function webhookRoutes(deps: AppDeps) {
  const privacy = {
    hasher: deps.hasher,
    queue: deps.queue,
  };
  const secret = deps.config.shopify.apiSecret;
  const key = secret ? importWebhookKey(secret) : null;
  return newRouter().openapi(shopifyWebhook, async (c) => {
    if (!key) {
      throw new HttpError(503, "service_unavailable", "SHOPIFY_API_SECRET is not configured");
    }
    const body = new Uint8Array(await c.req.arrayBuffer());
    if (!(await verifyShopifyHmac(await key, body, c.req.header("x-shopify-hmac-sha256")))) {
      throw new HttpError(401, "unauthorized", "Missing or invalid X-Shopify-Hmac-Sha256");
    }
    const topic = c.req.header("x-shopify-topic")?.trim();
    const shopHeader = c.req.header("x-shopify-shop-domain");
    const webhookId = c.req.header("x-shopify-webhook-id")?.trim();
    const missing = [
      topic ? null : "X-Shopify-Topic",
      shopHeader ? null : "X-Shopify-Shop-Domain",
      webhookId ? null : "X-Shopify-Webhook-Id",
    ].filter((name) => name !== null);
    if (missing.length > 0) {
      throw new HttpError(400, "bad_request", `missing header: ${missing.join(", ")}`);
    }
    if (topic!.length > 100 || webhookId!.length > 255) {
      throw new HttpError(400, "bad_request", "X-Shopify-Topic or X-Shopify-Webhook-Id too long");
    }
    const shop = parseShopDomain(shopHeader!);
    if (!shop) {
      throw new HttpError(400, "bad_request", "X-Shopify-Shop-Domain is not a *.myshopify.com");
    }
    let payload: unknown;
    try {
      payload = parseShopifyJson(new TextDecoder("utf-8", { fatal: true }).decode(body));
    } catch {
      throw new HttpError(400, "bad_request", "body is not valid JSON");
    }
    if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
      throw new HttpError(400, "bad_request", "body is not a JSON object");
    }
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", body));
    const result = await applyWebhook({ ...deps, privacy }, {
      topic: topic!.toLowerCase(),
      shop,
      webhookId: webhookId!,
      payload: payload as Record<string, unknown>,
      bodyDigest: Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""),
    });
    // An order from Shopify confirms the storefront claims waiting for it. Its retries (a
    // duplicate) ask again, so a failure to queue the stitch is not lost.
    if (
      (ORDER_TOPICS as readonly string[]).includes(topic!.toLowerCase()) &&
      result.outcome !== "ignored"
    ) {
      const order = payload as Record<string, unknown>;
      await queueStitchIfClaimed(
        deps,
        shop,
        shopifyNumericId(order.id) ?? shopifyNumericId(order.admin_graphql_api_id),
      );
    }
    await recordWebhookReceipt(deps.kv, shop, {
      topic: topic!.toLowerCase(),
      webhookId: webhookId!,
      outcome: result.outcome,
      receivedAt: deps.now().toISOString(),
    });
    return c.json({ received: true as const, ...result }, 200);
  });
}
