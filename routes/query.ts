/**
 * Query routes: count, metrics and aggregates of profiles or events under a condition.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { AppDeps } from "../lib/http/app_env.ts";
import { requireScope } from "../lib/http/auth.ts";
import type { BrandConcurrency } from "../lib/http/brand_concurrency.ts";
import { type ItemType, MAX_CONDITION_PATTERNS } from "../lib/engine/conditions.ts";
import { queryCondition } from "../lib/engine/caller_condition.ts";
import { aggregate, countItems, METRICS, metrics, withQueryBudget } from "../lib/engine/queries.ts";
import { HttpError } from "../lib/http/errors.ts";
import {
  apiKeySecurity,
  errorResponses,
  jsonBody,
  jsonResponse,
  newRouter,
} from "../lib/http/openapi.ts";

const ItemTypeParam = z.string().openapi({
  param: { name: "itemType", in: "path" },
  description: "profile or event (anything else is 404)",
  example: "profile",
});
const PropertyParam = z.string().min(1).max(200).openapi({
  param: { name: "property", in: "path" },
  example: "properties.age",
});
const conditionField = z.unknown().optional().openapi({
  type: "object",
  description: "A condition (docs/conditions.md; at most " +
    `${MAX_CONDITION_PATTERNS} matchesRegex patterns, 400 invalid_condition past it); omit to ` +
    "cover the whole scope",
});
const errors = errorResponses(400, 401, 403, 404, 405, 429, 502, 503);

const _SCOPE = "acme.myshopify.com";
const _CONDITION = {
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.nbOfVisits",
    comparisonOperator: "greaterThanOrEqualTo",
    propertyValueInteger: 2,
  },
};

const count = createRoute({
  operationId: "countItems",
  method: "post",
  path: "/cdp/query/{itemType}/count",
  tags: ["Query"],
  summary: "Count profiles or events matching a condition",
  security: apiKeySecurity,
  request: {
    params: z.object({ itemType: ItemTypeParam }),
    body: jsonBody(z.object({ condition: conditionField }).strict(), { condition: _CONDITION }, {
      required: false,
    }),
  },
  responses: {
    200: jsonResponse(
      z.object({ itemType: z.string(), count: z.number().int(), scope: z.string() }),
      "The count",
      { itemType: "profile", count: 42, scope: _SCOPE },
    ),
    ...errors,
  },
});

const metricsRoute = createRoute({
  operationId: "getPropertyMetrics",
  method: "post",
  path: "/cdp/query/{itemType}/{property}/metrics",
  tags: ["Query"],
  summary: "sum, avg, min, max of a numeric property",
  security: apiKeySecurity,
  request: {
    params: z.object({ itemType: ItemTypeParam, property: PropertyParam }),
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.object({ metrics: z.array(z.enum(METRICS)).min(1), condition: conditionField })
            .strict(),
          example: { metrics: ["sum", "avg", "min", "max"], condition: _CONDITION },
        },
      },
    },
  },
  responses: {
    200: jsonResponse(
      z.object({
        itemType: z.string(),
        property: z.string(),
        metrics: z.record(z.string(), z.number().nullable()),
        scope: z.string(),
      }),
      "The statistics, keyed _sum, _avg, _min, _max",
      {
        itemType: "profile",
        property: "properties.age",
        metrics: { _sum: 1302, _avg: 31, _min: 19, _max: 64 },
        scope: _SCOPE,
      },
    ),
    ...errors,
  },
});

// An absent or null bound is an open end, as in Unomi's and Elasticsearch's range aggregations.
const _rangeBound = z.union([z.number(), z.string().max(100)], {
  error: "must be a number, a date string (ISO 8601, date math or epoch milliseconds), or " +
    "null (or absent) for an open end",
}).nullable().optional();

const RangeSchema = z.object({
  key: z.string().min(1).max(100).optional(),
  from: _rangeBound,
  to: _rangeBound,
}).strict();

const aggregateRoute = createRoute({
  operationId: "aggregateProperty",
  method: "post",
  path: "/cdp/query/{itemType}/{property}/aggregate",
  tags: ["Query"],
  summary: "Histogram of a property: date, dateRange or numericRange",
  security: apiKeySecurity,
  request: {
    params: z.object({ itemType: ItemTypeParam, property: PropertyParam }),
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.object({
            aggregate: z.object({
              type: z.enum(["date", "dateRange", "numericRange"]),
              interval: z.string().max(20).optional().openapi({
                description: "For type date: one of 1m, minute, 1h, hour, 1d, day, 1w, week, " +
                  "1M, month, 1q, quarter, 1y, year",
              }),
              format: z.string().max(50).optional(),
              ranges: z.array(RangeSchema).min(1).max(20).optional(),
            }).strict().superRefine((a, ctx) => {
              if (a.type === "date" && !a.interval) {
                ctx.addIssue({
                  code: "custom",
                  path: ["interval"],
                  message: "required for type date",
                });
              }
              if (a.type !== "date" && !a.ranges) {
                ctx.addIssue({
                  code: "custom",
                  path: ["ranges"],
                  message: `required for type ${a.type}`,
                });
              }
              if (a.type === "numericRange" && a.format !== undefined) {
                ctx.addIssue({ code: "custom", path: ["format"], message: "not for numericRange" });
              }
            }),
            condition: conditionField,
          }).strict(),
          example: {
            aggregate: { type: "numericRange", ranges: [{ to: 30 }, { from: 30 }] },
            condition: _CONDITION,
          },
        },
      },
    },
  },
  responses: {
    200: jsonResponse(
      z.object({
        itemType: z.string(),
        property: z.string(),
        results: z.record(z.string(), z.number().int()),
        scope: z.string(),
      }),
      "Counts per bucket, plus _all, _filtered and _missing",
      {
        itemType: "profile",
        property: "properties.age",
        results: { "*-30": 17, "30-*": 25, _all: 42, _filtered: 42, _missing: 0 },
        scope: _SCOPE,
      },
    ),
    ...errors,
  },
});

/**
 * The query API, throttled by createApp, bounded by QUERY_TIMEOUT_MS and, per brand,
 * by `heavyReads`.
 */
export function queryRoutes(deps: AppDeps, options: { heavyReads: BrandConcurrency }) {
  const { heavyReads } = options;
  const run = <T>(brandId: string, fn: (sql: AppDeps["sql"]) => Promise<T>) =>
    heavyReads.run(brandId, () => withQueryBudget(deps.sql, deps.config.queryTimeoutMs, fn));

  // What every query shares: the item type, the scope, the caller's condition parsed at now.
  const question = (scope: string, itemType: string, condition: unknown) => {
    const type = _itemType(itemType);
    const now = deps.now();
    return { itemType: type, scope, condition: queryCondition(condition, type, now), now };
  };

  return newRouter()
    .openapi(count, async (c) => {
      const q = question(
        requireScope(c),
        c.req.valid("param").itemType,
        c.req.valid("json")?.condition,
      );
      const n = await run(c.get("auth").brandId, (sql) => countItems(sql, q));
      return c.json({ itemType: q.itemType, count: n, scope: q.scope }, 200);
    })
    .openapi(metricsRoute, async (c) => {
      const { itemType, property } = c.req.valid("param");
      const input = c.req.valid("json");
      const q = question(requireScope(c), itemType, input.condition);
      const result = await run(
        c.get("auth").brandId,
        (sql) => metrics(sql, { ...q, property, metrics: input.metrics }),
      );
      return c.json({ itemType: q.itemType, property, metrics: result, scope: q.scope }, 200);
    })
    .openapi(aggregateRoute, async (c) => {
      const { itemType, property } = c.req.valid("param");
      const input = c.req.valid("json");
      const q = question(requireScope(c), itemType, input.condition);
      const results = await run(
        c.get("auth").brandId,
        (sql) => aggregate(sql, { ...q, property, aggregate: input.aggregate }),
      );
      return c.json({ itemType: q.itemType, property, results, scope: q.scope }, 200);
    });
}

function _itemType(value: string): ItemType {
  if (value === "profile" || value === "event") return value;
  throw new HttpError(404, "not_found", `unknown itemType ${value}; use profile or event`);
}
