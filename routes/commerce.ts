/**
 * Commerce routes: orders and subscription contracts from the synced store
 * (`/cdp/commerce/orders`, `/cdp/commerce/subscriptions`), behind the commerce gate.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { AppDeps } from "../lib/http/app_env.ts";
import { requireCommerce } from "../lib/http/auth.ts";
import {
  BILLING_STATUSES,
  ORDER_STATES,
  SUBSCRIPTION_STATUSES,
} from "../lib/commerce/order_lines.ts";
import {
  getOrder,
  getSubscription,
  listOrders,
  listSubscriptions,
  resolveCustomerFilter,
} from "../lib/commerce/reads.ts";
import { HttpError } from "../lib/http/errors.ts";
import {
  apiKeySecurity,
  errorResponses,
  idParam,
  jsonResponse,
  newRouter,
} from "../lib/http/openapi.ts";
import {
  assertWithinWindow,
  limitParam,
  offsetPage,
  offsetParam,
  pageSchema,
} from "../lib/http/pagination.ts";

const OrderSummarySchema = z.object({
  id: z.string(),
  external_id: z.string(),
  number: z.string(),
  state: z.enum(ORDER_STATES),
  billing_status: z.enum(BILLING_STATUSES),
  total: z.string().openapi({ example: "199.99" }),
  currency_code: z.string(),
  customer: z.object({ contact_id: z.string().nullable() }),
  created_at: z.string(),
  recovered_at: z.string().nullable(),
}).openapi("OrderSummary");

const OrderDetailSchema = OrderSummarySchema.extend({
  customer: z.object({
    contact_id: z.string().nullable(),
    shopify_customer_id: z.string().optional(),
  }),
  processed_at: z.string().nullable(),
  updated_at: z.string().nullable(),
  line_items: z.array(z.object({
    title: z.string(),
    quantity: z.number().int(),
    price: z.string(),
    sku: z.string(),
    product_id: z.string(),
    variant_id: z.string(),
    variant_title: z.string(),
  })),
}).openapi("OrderDetail");

const SubscriptionSchema = z.object({
  id: z.string(),
  external_id: z.string(),
  status: z.enum(SUBSCRIPTION_STATUSES),
  next_billing_date: z.string().nullable(),
  customer: z.object({ contact_id: z.string().nullable() }),
  created_at: z.string(),
  updated_at: z.string(),
}).openapi("Subscription");

// Offset pages of the synced store: never a next cursor, and the brand's scope.
const page = <T extends z.ZodType>(item: T) =>
  pageSchema(item).extend({ scope: z.string(), nextCursor: z.null() });

const customerFilters = {
  customer_email: z.string().min(1).max(320).optional(),
  customer_phone: z.string().min(1).max(40).optional(),
  customer_id: z.string().min(1).max(255).optional().openapi({
    description: "Storefront customer id",
  }),
};

const listOrdersRoute = createRoute({
  method: "get",
  path: "/cdp/commerce/orders",
  tags: ["Commerce"],
  summary: "Orders from the synced store, newest first",
  description: "customer_* filters resolve to one customer by precedence email, then storefront " +
    "customer id, then phone (E.164); an identifier matching nobody gives an empty page.",
  security: apiKeySecurity,
  request: {
    query: z.object({
      limit: limitParam(),
      offset: offsetParam,
      created_at_gte: z.iso.datetime({ offset: true }).optional(),
      created_at_lte: z.iso.datetime({ offset: true }).optional(),
      state: z.enum(ORDER_STATES).optional(),
      billing_status: z.enum(BILLING_STATUSES).optional(),
      ...customerFilters,
    }),
  },
  responses: {
    200: jsonResponse(page(OrderSummarySchema), "A page of orders"),
    ...errorResponses(400, 401, 403, 405),
  },
});

const getOrderRoute = createRoute({
  method: "get",
  path: "/cdp/commerce/orders/{id}",
  tags: ["Commerce"],
  summary: "One order by its storefront (external) id",
  security: apiKeySecurity,
  request: { params: idParam("Storefront order id") },
  responses: {
    200: jsonResponse(OrderDetailSchema, "The order"),
    ...errorResponses(400, 401, 403, 404, 405),
  },
});

const listSubscriptionsRoute = createRoute({
  method: "get",
  path: "/cdp/commerce/subscriptions",
  tags: ["Commerce"],
  summary: "Subscription contracts",
  security: apiKeySecurity,
  request: {
    query: z.object({
      limit: limitParam(),
      offset: offsetParam,
      status: z.enum(SUBSCRIPTION_STATUSES).optional(),
      ...customerFilters,
    }),
  },
  responses: {
    200: jsonResponse(page(SubscriptionSchema), "A page of subscription contracts"),
    ...errorResponses(400, 401, 403, 405),
  },
});

const getSubscriptionRoute = createRoute({
  method: "get",
  path: "/cdp/commerce/subscriptions/{id}",
  tags: ["Commerce"],
  summary: "One subscription contract by its external id",
  security: apiKeySecurity,
  request: { params: idParam("Subscription contract id") },
  responses: {
    200: jsonResponse(SubscriptionSchema, "The contract"),
    ...errorResponses(400, 401, 403, 404, 405),
  },
});

/** Commerce reads from the synced store, behind the commerce gate. */
export function commerceRoutes(deps: AppDeps) {
  return newRouter()
    .openapi(listOrdersRoute, async (c) => {
      const scope = requireCommerce(c);
      const brandId = c.get("auth").brandId;
      const query = c.req.valid("query");
      assertWithinWindow(query);
      const contactId = await _customerFilter(deps, brandId, query);
      const result = await listOrders(deps.sql, brandId, {
        createdAtGte: query.created_at_gte ? new Date(query.created_at_gte) : undefined,
        createdAtLte: query.created_at_lte ? new Date(query.created_at_lte) : undefined,
        state: query.state,
        billingStatus: query.billing_status,
        contactId,
      }, query);
      return c.json({ ...offsetPage(result, query), scope }, 200);
    })
    .openapi(getOrderRoute, async (c) => {
      requireCommerce(c);
      const order = await getOrder(deps.sql, c.get("auth").brandId, c.req.valid("param").id);
      if (!order) throw new HttpError(404, "not_found", "Order not found");
      return c.json(order, 200);
    })
    .openapi(listSubscriptionsRoute, async (c) => {
      const scope = requireCommerce(c);
      const brandId = c.get("auth").brandId;
      const query = c.req.valid("query");
      assertWithinWindow(query);
      const contactId = await _customerFilter(deps, brandId, query);
      const result = await listSubscriptions(
        deps.sql,
        brandId,
        { status: query.status, contactId },
        query,
      );
      return c.json({ ...offsetPage(result, query), scope }, 200);
    })
    .openapi(getSubscriptionRoute, async (c) => {
      requireCommerce(c);
      const subscription = await getSubscription(
        deps.sql,
        c.get("auth").brandId,
        c.req.valid("param").id,
      );
      if (!subscription) throw new HttpError(404, "not_found", "Subscription not found");
      return c.json(subscription, 200);
    });
}

/** The contact the customer_* filters name (precedence email → storefront id → phone). */
function _customerFilter(
  deps: AppDeps,
  brandId: string,
  query: { customer_email?: string; customer_id?: string; customer_phone?: string },
): Promise<string | null | undefined> {
  return resolveCustomerFilter(deps.sql, brandId, {
    email: query.customer_email,
    customerId: query.customer_id,
    phone: query.customer_phone,
  });
}
