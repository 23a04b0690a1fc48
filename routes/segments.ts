/**
 * Segment routes: define, read, update, list, members and export.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { FEED_ROW_SPAN } from "../lib/audiences/changes.ts";
import { readChanges } from "../lib/audiences/feed.ts";
import { enqueueSegmentRefresh } from "../lib/audiences/jobs.ts";
import type { AppDeps } from "../lib/http/app_env.ts";
import { requireScope } from "../lib/http/auth.ts";
import type { BrandConcurrency } from "../lib/http/brand_concurrency.ts";
import { keysetStart, mintCursor, nextKeysetCursor, readCursor } from "../lib/http/cursors.ts";
import { withQueryBudget } from "../lib/engine/queries.ts";
import { segmentCondition } from "../lib/engine/caller_condition.ts";
import { MAX_CONDITION_PATTERNS } from "../lib/engine/conditions.ts";
import {
  createSegment,
  getSegment,
  listSegments,
  MAX_SEGMENTS_PER_BRAND,
  membersPage,
  openExport,
  segmentId,
  segmentView,
  updateSegment,
} from "../lib/engine/segments.ts";
import { HttpError } from "../lib/http/errors.ts";
import { log } from "../lib/log.ts";
import {
  apiKeySecurity,
  conflictResponse,
  errorResponses,
  idParam,
  jsonResponse,
  newRouter,
} from "../lib/http/openapi.ts";
import { storableText } from "../lib/http/route_guard.ts";
import {
  assertWithinWindow,
  cursorParam,
  limitParam,
  OFFSET_WINDOW,
  offsetPage,
  offsetParam,
  pageEnvelope,
  pageSchema,
} from "../lib/http/pagination.ts";

const ConditionSchema = z.object({
  type: z.string(),
  parameterValues: z.record(z.string(), z.unknown()),
}).passthrough().openapi("Condition", {
  description: "An Apache Unomi condition tree (docs/conditions.md)",
});

const SegmentSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().optional(),
  scope: z.string(),
  condition: ConditionSchema,
}).openapi("Segment");

const Ref = z.object({ id: z.string(), name: z.string(), scope: z.string() });
// A segment id holds the shop domain, so it may run past the usual 255.
const IdParam = idParam("The segment's id", 400, "seg__acme.myshopify.com__frequent_visitors");

const _SCOPE = "acme.myshopify.com";
const _CONDITION = {
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.nbOfVisits",
    comparisonOperator: "greaterThanOrEqualTo",
    propertyValueInteger: 5,
  },
};
const _REF = {
  id: "seg__acme.myshopify.com__frequent_visitors",
  name: "Frequent visitors",
  scope: _SCOPE,
};
const _SEGMENT = {
  ..._REF,
  description: "Five visits or more",
  condition: {
    type: "booleanCondition",
    parameterValues: {
      operator: "and",
      subConditions: [
        {
          type: "profilePropertyCondition",
          parameterValues: {
            propertyName: "properties.shopDomain",
            comparisonOperator: "equals",
            propertyValue: _SCOPE,
          },
        },
        _CONDITION,
      ],
    },
  },
};
/** Text the database can store: no NUL, no unpaired surrogate. */
const text = () =>
  z.string().refine(storableText, "must not contain a NUL character or an unpaired surrogate");
// Conditions are validated by the condition compiler (JSON paths, invalid_condition), so the
// body schema only takes it as a value.
const conditionField = z.unknown().openapi({
  type: "object",
  description: "A condition tree (docs/conditions.md): depth 10, 200 nodes, at most " +
    `${MAX_CONDITION_PATTERNS} matchesRegex patterns (400 invalid_condition past a limit)`,
});

const define = createRoute({
  operationId: "defineSegment",
  method: "post",
  path: "/cdp/segments",
  tags: ["Segments"],
  summary: "Define a segment (the brand's scope predicate is AND-injected)",
  description: `A brand defines at most ${MAX_SEGMENTS_PER_BRAND} segments: past it, 400 ` +
    "bad_request naming the limit (MAX_SEGMENTS_PER_BRAND); update one with PUT instead. Its " +
    `condition holds at most ${MAX_CONDITION_PATTERNS} matchesRegex patterns ` +
    "(MAX_CONDITION_PATTERNS, 400 invalid_condition past it).",
  security: apiKeySecurity,
  request: {
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.object({
            name: text().trim().min(1).max(200),
            condition: conditionField,
            key: text().min(1).max(64).optional(),
            description: text().max(2000).optional(),
          }).strict(),
          example: {
            name: "Frequent visitors",
            description: "Five visits or more",
            condition: _CONDITION,
          },
        },
      },
    },
  },
  responses: {
    200: jsonResponse(Ref, "Defined", _REF),
    ...errorResponses(400, 401, 403, 405, 502),
    409: conflictResponse("Id taken", "A segment with this id exists"),
  },
});

const list = createRoute({
  operationId: "listSegments",
  method: "get",
  path: "/cdp/segments",
  tags: ["Segments"],
  summary: "The brand's segments",
  security: apiKeySecurity,
  request: { query: z.object({ limit: limitParam(), offset: offsetParam }) },
  responses: {
    200: jsonResponse(
      pageSchema(SegmentSchema).extend({ nextCursor: z.null(), scope: z.string() }),
      "A page of segments",
      { list: [_SEGMENT], totalSize: 1, offset: 0, pageSize: 10, nextCursor: null, scope: _SCOPE },
    ),
    ...errorResponses(400, 401, 403, 405),
  },
});

const getOne = createRoute({
  operationId: "getSegment",
  method: "get",
  path: "/cdp/segments/{id}",
  tags: ["Segments"],
  summary: "A segment, its condition with the brand's scope predicate in front, as defined",
  security: apiKeySecurity,
  request: { params: IdParam },
  responses: {
    200: jsonResponse(SegmentSchema, "The segment", _SEGMENT),
    ...errorResponses(401, 403, 404, 405, 503),
  },
});

const update = createRoute({
  operationId: "updateSegment",
  method: "put",
  path: "/cdp/segments/{id}",
  tags: ["Segments"],
  summary: "Update a segment (strip scope predicates, validate, re-inject)",
  security: apiKeySecurity,
  request: {
    params: IdParam,
    body: {
      required: true,
      content: {
        "application/json": {
          schema: z.object({
            condition: conditionField,
            name: text().trim().min(1).max(200).optional(),
            description: text().max(2000).optional(),
          }).strict(),
          example: {
            condition: {
              ..._CONDITION,
              parameterValues: { ..._CONDITION.parameterValues, propertyValueInteger: 10 },
            },
            description: "Ten visits or more",
          },
        },
      },
    },
  },
  responses: {
    200: jsonResponse(Ref, "Updated", _REF),
    ...errorResponses(400, 401, 403, 404, 405, 502, 503),
  },
});

const members = createRoute({
  operationId: "listSegmentMembers",
  method: "get",
  path: "/cdp/segments/{id}/members",
  tags: ["Segments"],
  summary: "A segment's member profiles (paged like profiles)",
  security: apiKeySecurity,
  request: {
    params: IdParam,
    query: z.object({ limit: limitParam(), offset: offsetParam, cursor: cursorParam }),
  },
  responses: {
    200: jsonResponse(
      pageSchema(z.record(z.string(), z.unknown())).extend({
        identities: z.record(z.string(), z.record(z.string(), z.unknown())),
        scope: z.string(),
      }),
      "A page of members",
      {
        list: [{
          itemId: "store_acme_207119551",
          properties: { email: "bob@example.com", shopDomain: _SCOPE, nbOfVisits: 7 },
          provenance: "server",
        }],
        totalSize: 1,
        offset: 0,
        pageSize: 10,
        nextCursor: null,
        identities: { store_acme_207119551: { email: "bob@example.com", shopDomain: _SCOPE } },
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 404, 405, 429, 502, 503),
  },
});

const exportRoute = createRoute({
  operationId: "exportSegmentMembers",
  method: "get",
  path: "/cdp/segments/{id}/export",
  tags: ["Segments"],
  summary: "Export members as NDJSON; X-Next-Cursor while members remain",
  security: apiKeySecurity,
  request: {
    params: IdParam,
    query: z.object({
      limit: limitParam(OFFSET_WINDOW, OFFSET_WINDOW, { clampLow: true }),
      cursor: cursorParam,
    }),
  },
  responses: {
    200: {
      description: "One profile per line (with `predictions`: p_alive, predicted_clv_365d, " +
        "expected_orders_365d, when the profile has any); no envelope",
      content: {
        "application/x-ndjson": {
          schema: z.string(),
          example:
            `{"itemId":"store_acme_207119551","properties":{"email":"bob@example.com","shopDomain":"${_SCOPE}"},"provenance":"server"}\n`,
        },
      },
      headers: z.object({ "X-Next-Cursor": z.string().optional() }),
    },
    ...errorResponses(400, 401, 403, 404, 405, 429, 502, 503),
  },
});

const ChangeSchema = z.object({
  id: z.string().openapi({
    description: "The change's id: unique and stable, sorting in feed order (`chg_` and 16 hex " +
      "digits; changes recorded before schema version 28 keep their ULIDs)",
  }),
  profileId: z.string(),
  change: z.enum(["entered", "exited"]),
  at: z.string().openapi({ description: "When the membership changed (ISO 8601)" }),
}).openapi("SegmentChange");

const changes = createRoute({
  operationId: "listSegmentChanges",
  method: "get",
  path: "/cdp/segments/{id}/changes",
  tags: ["Segments"],
  summary: "The segment's membership changes, oldest first; resume from nextCursor",
  description: "Who entered or exited the segment, in the order the changes were committed. " +
    "`nextCursor` is always present: the position after this page (the request's own position " +
    "when the page is empty). A consumer that keeps the last `nextCursor` and resumes from it " +
    "sees every later change exactly once, in order. The cursor is bound to the brand and the " +
    "segment and lasts 30 days after it was issued.",
  security: apiKeySecurity,
  request: {
    params: IdParam,
    query: z.object({ limit: limitParam(), cursor: cursorParam }),
  },
  responses: {
    200: jsonResponse(
      z.object({ list: z.array(ChangeSchema), nextCursor: z.string(), scope: z.string() }),
      "A page of changes",
      {
        list: [{
          id: "01JD3Q7ZV4K3W5XH0Y2M8N6P9R",
          profileId: "store_acme_207119551",
          change: "entered",
          at: "2026-11-21T12:00:00.000Z",
        }],
        nextCursor: "c1_q0R3nZl8WbX6Yk2Vt1Hs9A",
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 404, 405),
  },
});

/** How long a change feed's cursor stays redeemable: a consumer may poll rarely. */
const _FEED_CURSOR_TTL_MS = 30 * 86_400_000;

/** A change feed cursor: the feed position read up to (`seq`: one minted before migration 28). */
type _FeedCursor = { position: string } | { seq: string };

/** The position a feed cursor resumes after (a `seq` was the row of a one-change row). */
function _feedPosition(cursor: _FeedCursor): string {
  return "position" in cursor
    ? cursor.position
    : String(BigInt(cursor.seq) * BigInt(FEED_ROW_SPAN));
}

/**
 * Segments: define, read, update, list, members and export. Members and export are heavy reads,
 * bounded per brand by `heavyReads`.
 */
export function segmentRoutes(deps: AppDeps, options: { heavyReads: BrandConcurrency }) {
  const { heavyReads } = options;
  const cursorDeps = { kv: deps.kv, now: deps.now, ttlMs: deps.config.cursorTtlSeconds * 1000 };
  const notFound = () => new HttpError(404, "not_found", "Segment not found");
  const find = async (scope: string, id: string) =>
    (await getSegment(deps.sql, scope, id)) ?? _throw(notFound());

  return newRouter()
    .openapi(define, async (c) => {
      const scope = requireScope(c);
      const body = c.req.valid("json");
      const condition = segmentCondition(body.condition);
      const segment = await createSegment(deps.sql, {
        scope,
        id: segmentId(scope, body.key ?? body.name),
        name: body.name,
        description: body.description,
        condition,
        now: deps.now(),
      });
      await _refreshMembers(deps, scope, segment.id);
      return c.json({ id: segment.id, name: segment.name, scope }, 200);
    })
    .openapi(list, async (c) => {
      const scope = requireScope(c);
      const page = c.req.valid("query");
      assertWithinWindow(page);
      const { list, total } = await listSegments(deps.sql, scope, page);
      return c.json({ ...offsetPage({ list: list.map(segmentView), total }, page), scope }, 200);
    })
    .openapi(getOne, async (c) => {
      const scope = requireScope(c);
      return c.json(segmentView(await find(scope, c.req.valid("param").id)), 200);
    })
    .openapi(update, async (c) => {
      const scope = requireScope(c);
      const id = c.req.valid("param").id;
      const body = c.req.valid("json");
      await find(scope, id);
      const condition = segmentCondition(body.condition);
      const segment = await updateSegment(deps.sql, {
        scope,
        id,
        ...body,
        condition,
        now: deps.now(),
      });
      if (!segment) throw notFound();
      await _refreshMembers(deps, scope, segment.id);
      return c.json({ id: segment.id, name: segment.name, scope }, 200);
    })
    .openapi(members, async (c) => {
      const scope = requireScope(c);
      const segment = await find(scope, c.req.valid("param").id);
      const query = c.req.valid("query");
      const binding = {
        brandId: c.get("auth").brandId,
        route: "/cdp/segments/:id/members",
        resource: segment.id,
      };
      const { after, offset } = await keysetStart(cursorDeps, query, binding);
      const now = deps.now();
      const page = await heavyReads.run(
        binding.brandId,
        () =>
          withQueryBudget(deps.sql, deps.config.queryTimeoutMs, (sql) =>
            membersPage(sql, segment, {
              limit: query.limit,
              offset,
              after,
              now,
              cap: OFFSET_WINDOW + 1,
            })),
      );
      const nextCursor = await nextKeysetCursor(cursorDeps, binding, {
        more: page.more,
        lastId: page.list.at(-1)?.itemId,
        offset,
        count: page.list.length,
      });
      return c.json({
        ...pageEnvelope({
          list: page.list,
          totalSize: page.totalSize,
          offset,
          limit: query.limit,
          nextCursor,
        }),
        identities: page.identities,
        scope,
      }, 200);
    })
    .openapi(changes, async (c) => {
      const scope = requireScope(c);
      const segment = await find(scope, c.req.valid("param").id);
      const query = c.req.valid("query");
      const binding = {
        brandId: c.get("auth").brandId,
        route: "/cdp/segments/:id/changes",
        resource: segment.id,
      };
      const feedCursors = { ...cursorDeps, ttlMs: _FEED_CURSOR_TTL_MS };
      const after = query.cursor === undefined
        ? "0"
        : _feedPosition(await readCursor<_FeedCursor>(feedCursors, query.cursor, binding));
      const page = await readChanges(deps.sql, {
        scope,
        segmentId: segment.id,
        after,
        limit: query.limit,
      });
      // Polling an unchanged feed hands back the same cursor rather than minting one per poll.
      const nextCursor = query.cursor !== undefined && page.list.length === 0
        ? query.cursor
        : await mintCursor(feedCursors, binding, { position: page.last });
      return c.json({ list: page.list, nextCursor, scope }, 200);
    })
    .openapi(exportRoute, async (c) => {
      const scope = requireScope(c);
      const segment = await find(scope, c.req.valid("param").id);
      const query = c.req.valid("query");
      const binding = {
        brandId: c.get("auth").brandId,
        route: "/cdp/segments/:id/export",
        resource: segment.id,
      };
      const after = query.cursor === undefined
        ? undefined
        : (await readCursor<{ after: string }>(cursorDeps, query.cursor, binding)).after;
      const now = deps.now();
      // The permit is held until the body ends or is cancelled, as the reserved connection is.
      const page = await openExport(deps.sql, segment, {
        after,
        limit: query.limit,
        now,
        timeoutMs: deps.config.queryTimeoutMs,
        onClose: heavyReads.acquire(binding.brandId),
      });
      c.header("Content-Type", "application/x-ndjson");
      if (page.more && page.lastId) {
        try {
          c.header("X-Next-Cursor", await mintCursor(cursorDeps, binding, { after: page.lastId }));
        } catch (err) {
          await page.lines.cancel();
          throw err;
        }
      }
      // Hono answers HEAD with GET's headers and drops the body unread: give it back now.
      if (c.req.method === "HEAD") {
        await page.lines.cancel();
        return c.body(null, 200) as never;
      }
      // A streamed NDJSON body is outside what the typed route helper can express.
      return c.body(page.lines, 200) as never;
    });
}

/**
 * Queues the segment's full membership diff (lib/audiences). The definition is stored already:
 * should the queue refuse, the log says so and the next change or sweep catches up, rather than
 * the caller being told a stored segment failed.
 */
async function _refreshMembers(deps: AppDeps, scope: string, segmentId: string): Promise<void> {
  const queued = await enqueueSegmentRefresh(deps.queue, scope, segmentId).catch(() => false);
  if (!queued) (deps.log ?? log)("error", "segment membership refresh not queued", { segmentId });
}

function _throw(err: Error): never {
  throw err;
}
