/**
 * Customer and insight routes: the unified customer record, its orders and insights
 * (`/cdp/customers/{identifier}`), the brand's insights (`/cdp/insights/*`) and its integrations.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppDeps, AppEnv } from "../lib/http/app_env.ts";
import { requireCommerce, requireScope } from "../lib/http/auth.ts";
import type { BrandConcurrency } from "../lib/http/brand_concurrency.ts";
import { customerRecord, integrationsOf, resolveCustomer } from "../lib/commerce/customers.ts";
import {
  atRiskCustomers,
  brandLtv,
  brandProducts,
  brandRfm,
  customerInsights,
  revenueByMonth,
} from "../lib/commerce/insights.ts";
import { EVENT_VOLUME_DAYS, eventVolumeByDay } from "../lib/engine/event_volume.ts";
import { listOrders } from "../lib/commerce/reads.ts";
import { HttpError } from "../lib/http/errors.ts";
import { apiKeySecurity, errorResponses, jsonResponse, newRouter } from "../lib/http/openapi.ts";
import { assertWithinWindow, limitParam, offsetPage, offsetParam } from "../lib/http/pagination.ts";

const Identifier = z.object({
  identifier: z.string().min(1).max(320).openapi({
    param: { name: "identifier", in: "path" },
    description:
      "Email (has @), phone (leading +), storefront customer id (digits), profile id or contact id (UUID)",
    example: "bob@example.com",
  }),
});
// Documented as JSON objects, without a schema for their fields.
const AnyObject = z.record(z.string(), z.unknown());
const errors = errorResponses(400, 401, 403, 404, 405);

// Examples: one customer, Bob, with two completed orders of one product.
const _SCOPE = "acme.myshopify.com";
const _MATCH = { identifier: "bob@example.com", matched_by: "email", scope: _SCOPE };
const _INTEGRATION = {
  id: "01M8703TW14VX6A8TDKZC5ZE9E",
  integration_id: "abde22e3-b22c-4a34-848a-8310d1c7d866",
  is_enabled: true,
  status: "connected",
  connected_at: "2026-11-21T12:00:00.000Z",
};
const _TOP_PRODUCT = {
  product_id: "632910392",
  title: "IPod Nano - 8GB",
  quantity: 2,
  order_count: 2,
  revenue: "298.00",
  customer_count: 1,
  repeat_purchase_rate: 1,
};
const _CHURN = {
  days_since_last_order: 81,
  median_inter_order_days: 31,
  brand_median_inter_order_days: 31,
  at_risk_score: 1.31,
  at_risk: true,
};
const _scores = { "1": 0, "2": 0, "3": 0, "4": 0, "5": 1 };

const record = createRoute({
  operationId: "getCustomer",
  method: "get",
  path: "/cdp/customers/{identifier}",
  tags: ["Customers"],
  summary: "The unified customer record: profile, commerce, integrations, subscription",
  description:
    "`profile.segments` lists the ids of the brand's segments the profile belongs to. They are " +
    "evaluated together by one statement on the brand's share of heavy reads, within " +
    "QUERY_TIMEOUT_MS in all: a segment not decided (past the budget, its condition failing, or " +
    "the brand's heavy reads at their share) is listed in `profile.segments_unknown` instead, " +
    "and the record is still 200. A brand has at most 200 segments.",
  security: apiKeySecurity,
  request: { params: Identifier },
  responses: {
    200: jsonResponse(AnyObject, "The customer", {
      ..._MATCH,
      profile: {
        id: "store_acme_207119551",
        provenance: "server",
        identity: {
          email: "bob@example.com",
          firstName: "Bob",
          shopDomain: _SCOPE,
          shopifyCustomerId: "207119551",
        },
        consents: {
          newsletter: {
            scope: _SCOPE,
            typeIdentifier: "newsletter",
            status: "GRANTED",
            statusDate: "2026-11-01T00:00:00.000Z",
            revokeDate: null,
          },
        },
        segments: ["seg__acme.myshopify.com__frequent_visitors"],
        segments_unknown: [],
        behavior: {
          nb_of_visits: 1,
          first_visit: "2026-11-21T12:00:00.000Z",
          last_visit: "2026-11-21T12:00:00.000Z",
        },
      },
      commerce: {
        total_spend: "298.00",
        currency_code: "USD",
        order_count: 2,
        aov: "149.00",
        first_order_at: "2026-08-01T12:00:00.000Z",
        last_order_at: "2026-09-01T12:00:00.000Z",
      },
      integrations: [_INTEGRATION],
      subscription: {
        status: "active",
        active_count: 1,
        total_count: 1,
        next_billing_date: "2026-12-21T00:00:00.000Z",
      },
    }),
    ...errors,
  },
});

const orders = createRoute({
  operationId: "listCustomerOrders",
  method: "get",
  path: "/cdp/customers/{identifier}/orders",
  tags: ["Customers"],
  summary: "The customer's orders (all states), newest first",
  security: apiKeySecurity,
  request: { params: Identifier, query: z.object({ limit: limitParam(), offset: offsetParam }) },
  responses: {
    200: jsonResponse(AnyObject, "A page of orders", {
      list: [{
        id: "ord_01M8703V13P1QBGF7FQJK3G1H0",
        external_id: "1002",
        number: "#1002",
        state: "complete",
        billing_status: "complete",
        total: "99.00",
        currency_code: "USD",
        customer: { contact_id: "01a20e01-ebd7-7df9-88c4-e9af85a24f43" },
        created_at: "2026-09-01T12:00:00.000Z",
        recovered_at: null,
      }],
      totalSize: 2,
      offset: 0,
      pageSize: 1,
      nextCursor: null,
      scope: _SCOPE,
    }),
    ...errors,
  },
});

const insights = createRoute({
  operationId: "getCustomerInsights",
  method: "get",
  path: "/cdp/customers/{identifier}/insights",
  tags: ["Customers"],
  summary: "LTV, AOV, RFM, top products, churn and predictions over completed orders",
  description: "`predicted` (null until the brand has a ready model, see " +
    "`GET /cdp/insights/predictions`): the selected model's P(alive), expected orders in the " +
    "next 90 and 365 days, predicted CLV over 365 days and the expected next order (null when " +
    "P(alive) < 0.5); `churn.probability` = 1 − P(alive) (null without a model).",
  security: apiKeySecurity,
  request: { params: Identifier },
  responses: {
    200: jsonResponse(AnyObject, "The customer's insights", {
      ..._MATCH,
      insights: {
        ltv: "298.00",
        order_count: 2,
        aov: "149.00",
        first_order_at: "2026-08-01T12:00:00.000Z",
        last_order_at: "2026-09-01T12:00:00.000Z",
        currency_code: "USD",
        rfm: {
          recency_score: 5,
          frequency_score: 5,
          monetary_score: 5,
          tier: "champions",
          last_order_at: "2026-09-01T12:00:00.000Z",
          order_count: 2,
          ltv: "298.00",
        },
        top_products: [_TOP_PRODUCT],
        churn: { ..._CHURN, probability: 0.1832 },
        predicted: {
          model: "mbgnbd",
          p_alive: 0.8168,
          expected_orders_90d: 0.4121,
          expected_orders_365d: 1.4517,
          predicted_clv_365d: "187.45",
          expected_next_order_at: "2027-01-18T03:25:00.000Z",
        },
      },
    }),
    ...errors,
  },
});

const ltv = createRoute({
  operationId: "getLtvInsights",
  method: "get",
  path: "/cdp/insights/ltv",
  tags: ["Insights"],
  summary: "Brand lifetime value: totals and distribution",
  security: apiKeySecurity,
  responses: {
    200: jsonResponse(AnyObject, "LTV", {
      scope: _SCOPE,
      total_revenue: "298.00",
      customer_count: 1,
      average_ltv: "298.00",
      currency_code: "USD",
      distribution: [
        { label: "0-100", min: 0, max: 100, customer_count: 0 },
        { label: "100-250", min: 100, max: 250, customer_count: 0 },
        { label: "250-500", min: 250, max: 500, customer_count: 1 },
        { label: "500-1000", min: 500, max: 1000, customer_count: 0 },
        { label: "1000+", min: 1000, max: null, customer_count: 0 },
      ],
    }),
    ...errorResponses(401, 403, 405),
  },
});

const rfm = createRoute({
  operationId: "getRfmInsights",
  method: "get",
  path: "/cdp/insights/rfm",
  tags: ["Insights"],
  summary: "Customers per RFM tier and score",
  security: apiKeySecurity,
  responses: {
    200: jsonResponse(AnyObject, "RFM", {
      scope: _SCOPE,
      customer_count: 1,
      tiers: {
        champions: 1,
        loyal: 0,
        active: 0,
        new: 0,
        promising: 0,
        needs_attention: 0,
        at_risk: 0,
        almost_lost: 0,
        previously_loyal: 0,
        dormant: 0,
      },
      scores: { recency: _scores, frequency: _scores, monetary: _scores },
    }),
    ...errorResponses(401, 403, 405),
  },
});

const products = createRoute({
  operationId: "getProductInsights",
  method: "get",
  path: "/cdp/insights/products",
  tags: ["Insights"],
  summary: "The brand's top products by completed-order revenue",
  security: apiKeySecurity,
  request: { query: z.object({ limit: limitParam(100, 10) }) },
  responses: {
    200: jsonResponse(AnyObject, "Top products", { scope: _SCOPE, list: [_TOP_PRODUCT] }),
    ...errorResponses(400, 401, 403, 405),
  },
});

const atRisk = createRoute({
  operationId: "listAtRiskCustomers",
  method: "get",
  path: "/cdp/insights/at-risk",
  tags: ["Insights"],
  summary: "Customers past twice their order cadence, most valuable first",
  security: apiKeySecurity,
  request: { query: z.object({ limit: limitParam(), offset: offsetParam }) },
  responses: {
    200: jsonResponse(AnyObject, "A page of at-risk customers", {
      list: [{
        contact_id: "01a20e01-ebd7-7df9-88c4-e9af85a24f43",
        email: "bob@example.com",
        shopify_customer_id: "207119551",
        ltv: "298.00",
        order_count: 2,
        last_order_at: "2026-09-01T12:00:00.000Z",
        ..._CHURN,
      }],
      totalSize: 1,
      offset: 0,
      pageSize: 25,
      nextCursor: null,
      scope: _SCOPE,
    }),
    ...errorResponses(400, 401, 403, 405),
  },
});

const revenue = createRoute({
  operationId: "getRevenueInsights",
  method: "get",
  path: "/cdp/insights/revenue",
  tags: ["Insights"],
  summary: "Completed-order revenue per UTC month",
  security: apiKeySecurity,
  responses: {
    200: jsonResponse(AnyObject, "Revenue by month", {
      scope: _SCOPE,
      list: [
        { month: "2026-10", order_count: 412, revenue: "30211.50" },
        { month: "2026-11", order_count: 388, revenue: "28740.00" },
      ],
    }),
    ...errorResponses(401, 403, 405),
  },
});

const eventVolume = createRoute({
  operationId: "getEventVolume",
  method: "get",
  path: "/cdp/insights/events",
  tags: ["Insights"],
  summary: "Events received per UTC day over the last 30 days (today included)",
  security: apiKeySecurity,
  responses: {
    200: jsonResponse(AnyObject, "Event volume", {
      scope: _SCOPE,
      list: [{ day: "2026-11-23", events: 1840 }, { day: "2026-11-24", events: 1312 }],
    }),
    ...errorResponses(401, 403, 405),
  },
});

const integrations = createRoute({
  operationId: "listIntegrations",
  method: "get",
  path: "/cdp/integrations",
  tags: ["Commerce"],
  summary: "The brand's connected integrations (no settings, no credentials)",
  security: apiKeySecurity,
  responses: {
    200: jsonResponse(AnyObject, "Integrations", { scope: _SCOPE, list: [_INTEGRATION] }),
    ...errorResponses(401, 403, 405),
  },
});

/**
 * Customers, insights and integrations, behind the commerce gate. The customer record's segment
 * list is a heavy read, on the brand's share of `heavyReads`.
 */
export function customerRoutes(deps: AppDeps, options: { heavyReads: BrandConcurrency }) {
  const freshness = () => ({
    now: deps.now(),
    maxStalenessSeconds: deps.config.insightsMaxStalenessSeconds,
  });
  const resolve = async (c: Context<AppEnv>, identifier: string) => {
    const scope = requireCommerce(c);
    const brand = { brandId: c.get("auth").brandId, scope };
    const resolved = await resolveCustomer(deps.sql, brand, identifier);
    if (!resolved) throw new HttpError(404, "not_found", "Customer not found");
    return { brand, resolved };
  };
  return newRouter()
    .openapi(record, async (c) => {
      const identifier = c.req.valid("param").identifier;
      const { brand, resolved } = await resolve(c, identifier);
      const budget = {
        permit: () => options.heavyReads.tryAcquire(brand.brandId),
        timeoutMs: deps.config.queryTimeoutMs,
      };
      return c.json(
        await customerRecord(deps.sql, brand, identifier, resolved, deps.now(), budget),
        200,
      );
    })
    .openapi(orders, async (c) => {
      const { brand, resolved } = await resolve(c, c.req.valid("param").identifier);
      const page = c.req.valid("query");
      assertWithinWindow(page);
      const result = await listOrders(
        deps.sql,
        brand.brandId,
        { contactId: resolved.contactId },
        page,
      );
      return c.json({ ...offsetPage(result, page), scope: brand.scope }, 200);
    })
    .openapi(insights, async (c) => {
      const identifier = c.req.valid("param").identifier;
      const { brand, resolved } = await resolve(c, identifier);
      const insights = await customerInsights(
        deps.sql,
        brand.brandId,
        resolved.contactId,
        freshness(),
        deps.config.predictions,
      );
      return c.json({
        identifier,
        matched_by: resolved.matchedBy,
        scope: brand.scope,
        insights,
      }, 200);
    })
    .openapi(ltv, async (c) => {
      const scope = requireCommerce(c);
      return c.json(
        { scope, ...(await brandLtv(deps.sql, c.get("auth").brandId, freshness())) },
        200,
      );
    })
    .openapi(rfm, async (c) => {
      const scope = requireCommerce(c);
      return c.json(
        { scope, ...(await brandRfm(deps.sql, c.get("auth").brandId, freshness())) },
        200,
      );
    })
    .openapi(products, async (c) => {
      const scope = requireCommerce(c);
      const list = await brandProducts(
        deps.sql,
        c.get("auth").brandId,
        c.req.valid("query").limit,
        freshness(),
      );
      return c.json({ scope, list }, 200);
    })
    .openapi(atRisk, async (c) => {
      const scope = requireCommerce(c);
      const page = c.req.valid("query");
      assertWithinWindow(page);
      const result = await atRiskCustomers(deps.sql, c.get("auth").brandId, page, freshness());
      return c.json({ ...offsetPage(result, page), scope }, 200);
    })
    .openapi(revenue, async (c) => {
      const scope = requireCommerce(c);
      const list = await revenueByMonth(deps.sql, c.get("auth").brandId, freshness());
      return c.json({ scope, list }, 200);
    })
    .openapi(eventVolume, async (c) => {
      const scope = requireScope(c);
      const list = await eventVolumeByDay(deps.sql, scope, {
        now: deps.now(),
        days: EVENT_VOLUME_DAYS,
      });
      return c.json({ scope, list }, 200);
    })
    .openapi(integrations, async (c) => {
      const scope = requireCommerce(c);
      return c.json({ scope, list: await integrationsOf(deps.sql, c.get("auth").brandId) }, 200);
    });
}
