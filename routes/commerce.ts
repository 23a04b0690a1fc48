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

const _SCOPE = "acme.myshopify.com";
const _ORDER = {
  id: "01KAB3M4Q9R8S7T6V5W4X3Y2Z1",
  external_id: "820982911946154508",
  number: "#1001",
  state: "complete",
  billing_status: "complete",
  total: "199.00",
  currency_code: "USD",
  customer: { contact_id: "01KAB3M4Q9R8S7T6V5W4X3Y2Z2" },
  created_at: "2026-11-21T12:00:00.000Z",
  recovered_at: null,
};
const _SUBSCRIPTION = {
  id: "01KAB3M4Q9R8S7T6V5W4X3Y2Z3",
  external_id: "sc_1001",
  status: "active",
  next_billing_date: "2026-12-21",
  customer: { contact_id: "01KAB3M4Q9R8S7T6V5W4X3Y2Z2" },
  created_at: "2026-10-21T12:00:00.000Z",
  updated_at: "2026-11-21T12:00:00.000Z",
};
const _page = (item: unknown) => ({
  list: [item],
  totalSize: 1,
  offset: 0,
  pageSize: 10,
  nextCursor: null,
  scope: _SCOPE,
});

// Offset pages of the synced store: never a next cursor, and the brand's scope.
const page = <T extends z.ZodType>(item: T) =>
  pageSchema(item).extend({ scope: z.string(), nextCursor: z.null() });

const customerFilters = {
  customer_email: z.string().min(1).max(320).optional().openapi({ example: "bob@example.com" }),
  customer_phone: z.string().min(1).max(40).optional().openapi({ example: "+14155550123" }),
  customer_id: z.string().min(1).max(255).optional().openapi({
    description: "Storefront customer id",
    example: "207119551",
  }),
};

const listOrdersRoute = createRoute({
  operationId: "listOrders",
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
      created_at_gte: z.iso.datetime({ offset: true }).optional()
        .openapi({ example: "2026-11-01T00:00:00Z" }),
      created_at_lte: z.iso.datetime({ offset: true }).optional()
        .openapi({ example: "2026-11-30T23:59:59Z" }),
      state: z.enum(ORDER_STATES).optional().openapi({ example: "complete" }),
      billing_status: z.enum(BILLING_STATUSES).optional().openapi({ example: "complete" }),
      ...customerFilters,
    }),
  },
  responses: {
    200: jsonResponse(page(OrderSummarySchema), "A page of orders", _page(_ORDER)),
    ...errorResponses(400, 401, 403, 405),
  },
});

const getOrderRoute = createRoute({
  operationId: "getOrder",
  method: "get",
  path: "/cdp/commerce/orders/{id}",
  tags: ["Commerce"],
  summary: "One order by its storefront (external) id",
  security: apiKeySecurity,
  request: { params: idParam("Storefront order id", 255, "820982911946154508") },
  responses: {
    200: jsonResponse(OrderDetailSchema, "The order", {
      ..._ORDER,
      customer: { contact_id: "01KAB3M4Q9R8S7T6V5W4X3Y2Z2", shopify_customer_id: "207119551" },
      processed_at: "2026-11-21T12:00:05.000Z",
      updated_at: "2026-11-21T12:00:05.000Z",
      line_items: [{
        title: "IPod Nano - 8GB",
        quantity: 1,
        price: "199.00",
        sku: "IPOD2008PINK",
        product_id: "632910392",
        variant_id: "808950810",
        variant_title: "Pink",
      }],
    }),
    ...errorResponses(400, 401, 403, 404, 405),
  },
});

const listSubscriptionsRoute = createRoute({
  operationId: "listSubscriptions",
  method: "get",
  path: "/cdp/commerce/subscriptions",
  tags: ["Commerce"],
  summary: "Subscription contracts",
  security: apiKeySecurity,
  request: {
    query: z.object({
      limit: limitParam(),
      offset: offsetParam,
      status: z.enum(SUBSCRIPTION_STATUSES).optional().openapi({ example: "active" }),
      ...customerFilters,
    }),
  },
  responses: {
    200: jsonResponse(
      page(SubscriptionSchema),
      "A page of subscription contracts",
      _page(_SUBSCRIPTION),
    ),
    ...errorResponses(400, 401, 403, 405),
  },
});

const getSubscriptionRoute = createRoute({
  operationId: "getSubscription",
  method: "get",
  path: "/cdp/commerce/subscriptions/{id}",
  tags: ["Commerce"],
  summary: "One subscription contract by its external id",
  security: apiKeySecurity,
  request: { params: idParam("Subscription contract id", 255, "sc_1001") },
  responses: {
    200: jsonResponse(SubscriptionSchema, "The contract", _SUBSCRIPTION),
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
