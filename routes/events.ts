/**
 * Event routes: the event-type catalog and server-side ingestion.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { z as zod } from "zod";
import type { AppDeps } from "../lib/http/app_env.ts";
import { type AuthContext, requireScope } from "../lib/http/auth.ts";
import { type ApplyResult, createCommitGate, type EventBatch } from "../lib/engine/engine.ts";
import { databaseFailure } from "../lib/store/db.ts";
import { bufferBody } from "../lib/http/body_limit.ts";
import { HttpError } from "../lib/http/errors.ts";
import { EVENT_TYPES, eventTypeSummary } from "../lib/engine/event_types.ts";
import {
  IngestBodySchema,
  MAX_ASYNC_BATCH,
  MAX_INGEST_BODY_BYTES,
  MAX_SYNC_BATCH,
  parseJsonBody,
  validateBatch,
} from "../lib/ingest/edge.ts";
import { acceptEvents } from "../lib/ingest/accept.ts";
import { apiKeySecurity, errorResponses, jsonResponse, newRouter } from "../lib/http/openapi.ts";
import { hitRateLimits } from "../lib/http/rate_limit.ts";
import { meterInto } from "../lib/http/usage.ts";

const EventTypeSchema = z.object({
  name: z.string(),
  source: z.enum(["built-in", "custom"]),
  title: z.string(),
  description: z.string(),
  schema: z.object({
    $id: z.string(),
    version: z.string(),
    required: z.array(z.string()),
    properties: z.record(z.string(), z.string()),
  }),
}).openapi("EventType");

const RejectedSchema = z.array(z.object({
  index: z.number().int(),
  errors: z.array(z.object({ path: z.string(), message: z.string() })),
})).openapi("RejectedEvents");

const ResultSchema = z.object({
  index: z.number().int(),
  ok: z.boolean(),
  status: z.number().int(),
  result: z.object({ updated: z.number().int(), processedItems: z.number().int() }).optional(),
  error: z.string().optional(),
}).openapi("SyncResult");

// Built-in types never change while the process runs, so the sorted catalog is built once.
const _catalog = EVENT_TYPES.map(eventTypeSummary)
  .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

const _SCOPE = "acme.myshopify.com";

const listTypes = createRoute({
  operationId: "listEventTypes",
  method: "get",
  path: "/cdp/events/types",
  tags: ["Events"],
  summary: "List the event types this brand can send",
  security: apiKeySecurity,
  responses: {
    200: jsonResponse(
      z.object({ eventTypes: z.array(EventTypeSchema), scope: z.string() }),
      "The catalog, sorted by name",
      { eventTypes: _catalog.slice(0, 1), scope: _SCOPE },
    ),
    ...errorResponses(401, 403, 405),
  },
});

const _REJECTED = [{
  index: 2,
  errors: [{ path: "$.events[2].profileId", message: "must not contain ':'" }],
}];

const ingest = createRoute({
  operationId: "ingestEvents",
  method: "post",
  path: "/cdp/events",
  tags: ["Events"],
  summary: "Send a batch of events",
  description: `Async (default): up to ${MAX_ASYNC_BATCH} events, validated at the edge, queued, ` +
    `answered 202. Sync (?sync=true): up to ${MAX_SYNC_BATCH} events applied inline within the ` +
    "sync budget (it bounds the work up to the commit: a 503 means nothing was stored, and a " +
    "commit begun in time is waited for and answered by its outcome), answered 200 with a " +
    "result per event. Body at most 256 KB; events at most " +
    "32 KB each. `scope`, `shopDomain` and `source` are refused anywhere in the batch.",
  security: apiKeySecurity,
  request: {
    query: z.object({
      sync: z.enum(["true", "false"]).optional()
        .openapi({ description: "true = synchronous", example: "false" }),
    }),
    // A plain JSON Schema documents the body without validating it whole: events are validated
    // one by one so that the valid ones of a batch are still accepted.
    body: {
      required: true,
      content: {
        "application/json": {
          schema: zod.toJSONSchema(IngestBodySchema, { target: "draft-2020-12" }) as never,
          example: {
            events: [
              {
                eventType: "updateProperties",
                profileId: "store_acme_207119551",
                properties: { update: { "properties.email": "bob@example.com" } },
              },
              {
                eventType: "page_viewed",
                profileId: "store_acme_207119551",
                properties: { url: "https://acme.myshopify.com/" },
              },
              { eventType: "page_viewed", profileId: "bad:id" },
            ],
          },
        },
      },
    },
  },
  responses: {
    202: jsonResponse(
      z.object({
        accepted: z.number().int(),
        rejected: RejectedSchema,
        scope: z.string(),
      }),
      "Queued (async mode)",
      { accepted: 2, rejected: _REJECTED, scope: _SCOPE },
    ),
    200: jsonResponse(
      z.object({
        accepted: z.number().int(),
        rejected: RejectedSchema,
        results: z.array(ResultSchema),
        scope: z.string(),
      }),
      "Applied (sync mode)",
      {
        accepted: 2,
        rejected: _REJECTED,
        results: [
          { index: 0, ok: true, status: 200, result: { updated: 1, processedItems: 1 } },
          { index: 1, ok: true, status: 200, result: { updated: 0, processedItems: 1 } },
        ],
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 405, 408, 413, 429, 503),
  },
});

/** Event routes: the catalog and server-side ingestion. */
export function eventRoutes(deps: AppDeps) {
  const router = newRouter();
  router.use(
    "/cdp/events",
    bufferBody({ maxBytes: MAX_INGEST_BODY_BYTES, timeoutMs: deps.config.bodyReadTimeoutMs }),
  );
  router.openapi(listTypes, (c) => {
    const scope = requireScope(c);
    return c.json({ eventTypes: _catalog, scope }, 200);
  });
  router.openapi(ingest, async (c) => {
    const scope = requireScope(c);
    const auth = c.get("auth");
    const sync = c.req.valid("query").sync === "true";
    if (sync) await _syncThrottle(deps, auth);
    const { accepted, rejected } = validateBatch(parseJsonBody(c.get("body")), {
      maxEvents: sync ? MAX_SYNC_BATCH : MAX_ASYNC_BATCH,
      sync,
      newId: deps.newId,
      // Async mode asks the engine's schema check at the edge, so a caller learns at once
      // about an event that could never be applied; sync mode reports it per event instead.
      check: sync ? undefined : deps.engine.checkEvent,
    });
    if (!sync) {
      // One KV commit per request: the queue messages, the limiter counts and the usage record.
      const { folded } = await acceptEvents(
        deps,
        { brandId: auth.brandId, scope },
        "server",
        accepted,
        { also: (op) => meterInto(c, op, 202, deps.now()) },
      );
      const meter = c.get("meter");
      if (folded && meter) meter.done = true;
      return c.json({ accepted: accepted.length, rejected, scope }, 202);
    }
    const batch: EventBatch = {
      scope,
      source: "server",
      receivedAt: deps.now().toISOString(),
      events: accepted.map((a) => a.event),
    };
    const results = accepted.length === 0
      ? []
      : await _applyWithinBudget(deps, batch, deps.config.syncBudgetMs);
    return c.json({
      accepted: accepted.length,
      rejected,
      results: accepted.map((a, i) => ({ index: a.index, ...results[i]! })),
      scope,
    }, 200);
  });
  return router;
}

// Per key, and a brand-wide ceiling so that minting more keys does not multiply the brand's share.
async function _syncThrottle(deps: AppDeps, auth: AuthContext): Promise<void> {
  const perMinute = (name: string, limit: number) => ({ name, limit, windowMs: 60_000 });
  const result = await hitRateLimits(deps.kv, [
    { policy: perMinute("sync", deps.config.syncRateLimitPerMinute), subject: auth.keyId },
    {
      policy: perMinute("sync_brand", deps.config.brandSyncRateLimitPerMinute),
      subject: auth.brandId,
    },
  ], deps.now());
  if (!result.allowed) {
    const per = result.policy.name === "sync" ? "key" : "brand";
    throw new HttpError(
      429,
      "sync_throttled",
      `at most ${result.limit} sync requests per minute per ${per}; ` +
        `retry after ${result.retryAfterSeconds}s`,
      { headers: { "Retry-After": String(result.retryAfterSeconds) } },
    );
  }
}

/**
 * Applies a sync batch under a hard budget on the work up to its commit. The budget's end and
 * the engine's commit meet at a gate (lib/engine/engine.ts): when the budget runs out first, the
 * answer is 503 at once and the engine rolls back, so nothing is stored; once the engine has
 * begun to commit, the answer waits for the commit and follows its outcome. A 503 "nothing was
 * stored" is therefore never given for a batch that was stored (a retry would duplicate it).
 */
async function _applyWithinBudget(
  deps: AppDeps,
  batch: EventBatch,
  budgetMs: number,
): Promise<ApplyResult[]> {
  const deadline = Date.now() + budgetMs;
  const gate = createCommitGate();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const applying = deps.engine.applyEvents(batch, { deadline, gate });
  // Settles only when the budget wins; while a commit runs it stays pending.
  const expired = new Promise<"expired">((resolve) => {
    timer = setTimeout(() => gate.expire() && resolve("expired"), budgetMs);
  });
  let outcome: ApplyResult[] | "expired";
  try {
    outcome = await Promise.race([applying, expired]);
  } catch (err) {
    // The commit itself failing means it rolled back, unless the connection broke under it.
    const unknown = gate.committing && databaseFailure(err) === "lost";
    throw new HttpError(
      503,
      "upstream_unavailable",
      unknown
        ? "the connection to the database broke while the batch was committing; it may have " +
          "been stored"
        : "the engine did not apply the batch within the sync budget; nothing was stored",
      { cause: err },
    );
  } finally {
    clearTimeout(timer);
  }
  if (outcome === "expired") {
    // The losing engine call still settles (it rolls back); never leave its rejection unhandled.
    applying.catch(() => {});
    throw new HttpError(
      503,
      "upstream_unavailable",
      `the engine did not apply the batch within the sync budget of ${budgetMs} ms; nothing was ` +
        "stored",
    );
  }
  return outcome;
}
