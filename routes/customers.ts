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
  }),
});
// Documented as JSON objects, without a schema for their fields.
const AnyObject = z.record(z.string(), z.unknown());
const errors = errorResponses(400, 401, 403, 404, 405);

const record = createRoute({
  method: "get",
  path: "/cdp/customers/{identifier}",
  tags: ["Customers"],
  summary: "The unified customer record: profile, commerce, integrations, subscription",
  security: apiKeySecurity,
  request: { params: Identifier },
  responses: { 200: jsonResponse(AnyObject, "The customer"), ...errors },
});

const orders = createRoute({
  method: "get",
  path: "/cdp/customers/{identifier}/orders",
  tags: ["Customers"],
  summary: "The customer's orders (all states), newest first",
  security: apiKeySecurity,
  request: { params: Identifier, query: z.object({ limit: limitParam(), offset: offsetParam }) },
  responses: { 200: jsonResponse(AnyObject, "A page of orders"), ...errors },
});

const insights = createRoute({
  method: "get",
  path: "/cdp/customers/{identifier}/insights",
  tags: ["Customers"],
  summary: "LTV, AOV, RFM, top products and churn over completed orders",
  security: apiKeySecurity,
  request: { params: Identifier },
  responses: { 200: jsonResponse(AnyObject, "The customer's insights"), ...errors },
});

const ltv = createRoute({
  method: "get",
  path: "/cdp/insights/ltv",
  tags: ["Insights"],
  summary: "Brand lifetime value: totals and distribution",
  security: apiKeySecurity,
  responses: { 200: jsonResponse(AnyObject, "LTV"), ...errorResponses(401, 403, 405) },
});

const rfm = createRoute({
  method: "get",
  path: "/cdp/insights/rfm",
  tags: ["Insights"],
  summary: "Customers per RFM tier and score",
  security: apiKeySecurity,
  responses: { 200: jsonResponse(AnyObject, "RFM"), ...errorResponses(401, 403, 405) },
});

const products = createRoute({
  method: "get",
  path: "/cdp/insights/products",
  tags: ["Insights"],
  summary: "The brand's top products by completed-order revenue",
  security: apiKeySecurity,
  request: { query: z.object({ limit: limitParam(100, 10) }) },
  responses: {
    200: jsonResponse(AnyObject, "Top products"),
    ...errorResponses(400, 401, 403, 405),
  },
});

const atRisk = createRoute({
  method: "get",
  path: "/cdp/insights/at-risk",
  tags: ["Insights"],
  summary: "Customers past twice their order cadence, most valuable first",
  security: apiKeySecurity,
  request: { query: z.object({ limit: limitParam(), offset: offsetParam }) },
  responses: {
    200: jsonResponse(AnyObject, "A page of at-risk customers"),
    ...errorResponses(400, 401, 403, 405),
  },
});

const revenue = createRoute({
  method: "get",
  path: "/cdp/insights/revenue",
  tags: ["Insights"],
  summary: "Completed-order revenue per UTC month",
  security: apiKeySecurity,
  responses: { 200: jsonResponse(AnyObject, "Revenue by month"), ...errorResponses(401, 403, 405) },
});

const eventVolume = createRoute({
  method: "get",
  path: "/cdp/insights/events",
  tags: ["Insights"],
  summary: "Events received per UTC day over the last 30 days (today included)",
  security: apiKeySecurity,
  responses: { 200: jsonResponse(AnyObject, "Event volume"), ...errorResponses(401, 403, 405) },
});

const integrations = createRoute({
  method: "get",
  path: "/cdp/integrations",
  tags: ["Commerce"],
  summary: "The brand's connected integrations (no settings, no credentials)",
  security: apiKeySecurity,
  responses: { 200: jsonResponse(AnyObject, "Integrations"), ...errorResponses(401, 403, 405) },
});

/** Customers, insights and integrations, behind the commerce gate. */
export function customerRoutes(deps: AppDeps) {
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
      return c.json(await customerRecord(deps.sql, brand, identifier, resolved, deps.now()), 200);
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
      return c.json({
        identifier,
        matched_by: resolved.matchedBy,
        scope: brand.scope,
        insights: await customerInsights(deps.sql, brand.brandId, resolved.contactId, freshness()),
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
