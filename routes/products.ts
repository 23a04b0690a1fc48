/**
 * Product routes: products read live from the Shopify Admin API through a short
 * read-through cache (`/cdp/commerce/products`).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { AppDeps } from "../lib/http/app_env.ts";
import { requireCommerce } from "../lib/http/auth.ts";
import { HttpError } from "../lib/http/errors.ts";
import {
  apiKeySecurity,
  errorResponses,
  jsonResponse,
  newRouter,
  validationHook,
} from "../lib/http/openapi.ts";
import { limitParam } from "../lib/http/pagination.ts";
import { parseProductId } from "../lib/shopify/admin_client.ts";
import { createProductReads } from "../lib/shopify/product_reads.ts";

const ProductSchema = z.object({
  id: z.string().openapi({ example: "632910392", description: "Numeric tail of the Shopify GID" }),
  title: z.string(),
  status: z.string().openapi({ example: "ACTIVE" }),
  variants: z.array(z.object({
    id: z.string().openapi({ example: "808950810" }),
    price: z.string().openapi({ example: "199.99" }),
    sku: z.string().nullable(),
  })),
  images: z.array(z.object({
    id: z.string(),
    url: z.string(),
    altText: z.string().nullable(),
  })),
}).openapi("Product");

const _PRODUCT = {
  id: "632910392",
  title: "IPod Nano - 8GB",
  status: "ACTIVE",
  variants: [{ id: "808950810", price: "199.00", sku: "IPOD2008PINK" }],
  images: [{
    id: "562641783",
    url: "https://cdn.shopify.com/s/files/1/0001/ipod-nano.png",
    altText: null,
  }],
};

const listProductsRoute = createRoute({
  operationId: "listProducts",
  method: "get",
  path: "/cdp/commerce/products",
  tags: ["Commerce"],
  summary: "Products, live from the Shopify Admin API (short read-through cache)",
  description: "Pages follow Shopify's own cursors: pass `nextCursor` back as `cursor`. " +
    "A throttled shop is retried a bounded number of times, then answered 429 with Retry-After.",
  security: apiKeySecurity,
  request: {
    query: z.object({
      limit: limitParam(),
      cursor: z.string().min(1).max(512).regex(/^[A-Za-z0-9+/=_-]+$/, "not a cursor").optional()
        .openapi({
          description: "The `nextCursor` of the previous page",
          example: "eyJsYXN0X2lkIjo2MzI5MTAzOTJ9",
        }),
    }),
  },
  responses: {
    200: jsonResponse(
      z.object({
        list: z.array(ProductSchema),
        pageSize: z.number().int(),
        scope: z.string().nullable(),
        nextCursor: z.string().nullable(),
      }),
      "A page of products",
      {
        list: [_PRODUCT],
        pageSize: 10,
        scope: "acme.myshopify.com",
        nextCursor: "eyJsYXN0X2lkIjo2MzI5MTAzOTJ9",
      },
    ),
    ...errorResponses(400, 401, 403, 405, 429, 502),
  },
});

const getProductRoute = createRoute({
  operationId: "getProduct",
  method: "get",
  path: "/cdp/commerce/products/{id}",
  tags: ["Commerce"],
  summary: "One product, live from the Shopify Admin API (short read-through cache)",
  security: apiKeySecurity,
  request: {
    params: z.object({
      id: z.string().min(1).max(255).openapi({
        param: { name: "id", in: "path" },
        description: "Numeric product id, or its GID `gid://shopify/Product/<id>` (URL-encoded)",
        example: "632910392",
      }),
    }),
  },
  responses: {
    200: jsonResponse(ProductSchema, "The product", _PRODUCT),
    ...errorResponses(401, 403, 404, 405, 429, 502),
  },
});

// A bad `limit` is "invalid page size"; everything else as every route.
function pageSizeHook(
  result: { success: true } | { success: false; error: { issues: { path: PropertyKey[] }[] } },
): void {
  if (!result.success && result.error.issues.some((issue) => issue.path[0] === "limit")) {
    throw new HttpError(400, "bad_request", "invalid page size: limit must be an integer >= 1");
  }
}

/** Product reads live from Shopify, behind the commerce gate. */
export function productRoutes(deps: AppDeps) {
  const products = createProductReads(deps);
  return newRouter()
    .openapi(listProductsRoute, async (c) => {
      const scope = requireCommerce(c);
      const { limit, cursor } = c.req.valid("query");
      const page = await products.list(
        { brandId: c.get("auth").brandId, scope },
        { first: limit, after: cursor },
      );
      return c.json({ list: page.list, pageSize: limit, scope, nextCursor: page.nextCursor }, 200);
    }, (result, c) => {
      pageSizeHook(result);
      return validationHook(result, c);
    })
    .openapi(getProductRoute, async (c) => {
      const scope = requireCommerce(c);
      const id = parseProductId(c.req.valid("param").id);
      const product = id === null
        ? null
        : await products.get({ brandId: c.get("auth").brandId, scope }, id);
      if (!product) throw new HttpError(404, "not_found", "Product not found");
      return c.json(product, 200);
    });
}
