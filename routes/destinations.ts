/**
 * Destination routes: define, list, read, update and delete a brand's webhook destinations, send
 * one a test, rotate its signing secret, and read its recent deliveries
 * (docs/audiences.md#destinations).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { sendTestDelivery } from "../lib/audiences/delivery.ts";
import { recentDeliveries } from "../lib/audiences/deliveries.ts";
import {
  createDestination,
  deleteDestination,
  type DestinationView,
  getDestination,
  listDestinations,
  MAX_ROTATION_OVERLAP_SECONDS,
  rotateSigningSecret,
  updateDestination,
} from "../lib/audiences/destinations.ts";
import type { AppDeps } from "../lib/http/app_env.ts";
import { requireScope } from "../lib/http/auth.ts";
import { HttpError } from "../lib/http/errors.ts";
import {
  apiKeySecurity,
  errorResponses,
  idParam,
  jsonBody,
  jsonResponse,
  newRouter,
} from "../lib/http/openapi.ts";
import { assertWithinWindow, offsetPage, pageQuery, pageSchema } from "../lib/http/pagination.ts";
import { storableText } from "../lib/http/route_guard.ts";
import { CONSENT_TYPE_PATTERN } from "../lib/engine/consents.ts";

const _SCOPE = "acme.myshopify.com";
const _SEGMENT = "seg__acme.myshopify.com__vips_at_risk";
const _DESTINATION = {
  id: "dst_01JQ2Z8K4G7T6R3M2N1P0Q9V8W",
  name: "Email tool",
  type: "webhook",
  url: "https://hooks.example.com/cdp",
  segments: [_SEGMENT],
  requiredConsent: "marketing_email",
  createdAt: "2026-11-26T10:00:00.000Z",
  updatedAt: "2026-11-26T10:00:00.000Z",
};

const DestinationSchema = z.object({
  id: z.string(),
  name: z.string(),
  type: z.literal("webhook"),
  url: z.string(),
  segments: z.array(z.string()),
  requiredConsent: z.string().nullable().openapi({
    description: "The consent type a profile must have granted (consents.<type>.status GRANTED, " +
      "not revoked) for its changes to be delivered; null: none required",
  }),
  createdAt: z.string(),
  updatedAt: z.string(),
}).openapi("Destination");

const text = () =>
  z.string().refine(storableText, "must not contain a NUL character or an unpaired surrogate");

const DestinationBody = z.object({
  name: text().trim().min(1).max(200),
  type: z.literal("webhook"),
  url: text().max(2048).openapi({
    description: "https, resolving to public addresses (http and private addresses only with " +
      "DESTINATIONS_ALLOW_PRIVATE=true)",
  }),
  segments: z.array(text().min(1).max(400)).min(1).max(200)
    .refine((ids) => new Set(ids).size === ids.length, "must not repeat a segment")
    .openapi({ description: "Ids of the brand's segments whose entries and exits it receives" }),
  requiredConsent: z.string().regex(CONSENT_TYPE_PATTERN, "must be a consent type identifier")
    .nullable().optional().openapi({
      description: "A consent type (Unomi's typeIdentifier): only profiles with it granted are " +
        "delivered; absent or null: none required",
    }),
}).strict();

const _BODY_EXAMPLE = {
  name: "Email tool",
  type: "webhook",
  url: "https://hooks.example.com/cdp",
  segments: [_SEGMENT],
  requiredConsent: "marketing_email",
};

/** How long a rotated secret keeps signing when the caller does not say. */
const _DEFAULT_OVERLAP_SECONDS = 86_400;

const IdParam = idParam("The destination's id", 64, _DESTINATION.id);

const DeliverySchema = z.object({
  id: z.string().openapi({ description: "The X-CDP-Delivery-Id of its POSTs" }),
  status: z.enum(["pending", "delivered", "dead"]),
  count: z.number().int().openapi({ description: "Changes it carries (at most 100)" }),
  attempts: z.number().int(),
  lastStatus: z.number().int().nullable().openapi({ description: "The last answer's status" }),
  lastError: z.string().nullable(),
  createdAt: z.string(),
  nextAttemptAt: z.string().nullable(),
  completedAt: z.string().nullable(),
}).openapi("Delivery");

const create = createRoute({
  operationId: "createDestination",
  method: "post",
  path: "/cdp/destinations",
  tags: ["Destinations"],
  summary: "Define a webhook destination of some of the brand's segments",
  description: "Answers the signing `secret` once: keep it to verify `X-CDP-Signature`. The " +
    "destination receives the entries and exits made from now on. A brand has at most " +
    "MAX_DESTINATIONS_PER_BRAND destinations (400 past it); a segment not the brand's is 404.",
  security: apiKeySecurity,
  request: { body: jsonBody(DestinationBody, _BODY_EXAMPLE) },
  responses: {
    201: jsonResponse(
      DestinationSchema.extend({ secret: z.string(), scope: z.string() }),
      "Defined; the signing secret is in `secret`, only this once",
      {
        ..._DESTINATION,
        secret: "whsec_3q2-7wAbCdEfGhIjKlMnOpQrStUvWxYz0123456789A",
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 404, 405, 503),
  },
});

const list = createRoute({
  operationId: "listDestinations",
  method: "get",
  path: "/cdp/destinations",
  tags: ["Destinations"],
  summary: "The brand's destinations (no secrets)",
  security: apiKeySecurity,
  request: { query: pageQuery },
  responses: {
    200: jsonResponse(
      pageSchema(DestinationSchema).extend({ nextCursor: z.null(), scope: z.string() }),
      "A page of destinations",
      {
        list: [_DESTINATION],
        totalSize: 1,
        offset: 0,
        pageSize: 25,
        nextCursor: null,
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 405, 503),
  },
});

const getOne = createRoute({
  operationId: "getDestination",
  method: "get",
  path: "/cdp/destinations/{id}",
  tags: ["Destinations"],
  summary: "A destination (no secret)",
  security: apiKeySecurity,
  request: { params: IdParam },
  responses: {
    200: jsonResponse(DestinationSchema, "The destination", _DESTINATION),
    ...errorResponses(401, 403, 404, 405, 503),
  },
});

const update = createRoute({
  operationId: "updateDestination",
  method: "put",
  path: "/cdp/destinations/{id}",
  tags: ["Destinations"],
  summary: "Replace a destination's name, URL and segments",
  description: "The secret and the destination's position in the change log stay: a segment " +
    "added is delivered from that position on.",
  security: apiKeySecurity,
  request: { params: IdParam, body: jsonBody(DestinationBody, _BODY_EXAMPLE) },
  responses: {
    200: jsonResponse(DestinationSchema, "Updated", _DESTINATION),
    ...errorResponses(400, 401, 403, 404, 405, 503),
  },
});

const remove = createRoute({
  operationId: "deleteDestination",
  method: "delete",
  path: "/cdp/destinations/{id}",
  tags: ["Destinations"],
  summary: "Delete a destination and its deliveries (nothing more is sent to it)",
  security: apiKeySecurity,
  request: { params: IdParam },
  responses: {
    204: { description: "Deleted" },
    ...errorResponses(401, 403, 404, 405, 503),
  },
});

const testRoute = createRoute({
  operationId: "testDestination",
  method: "post",
  path: "/cdp/destinations/{id}/test",
  tags: ["Destinations"],
  summary: "Send the destination a signed test POST now and say how it answered",
  description: "The body is `{destination, test: true, deliveries: []}`, signed and checked like " +
    "every delivery; nothing is retried or recorded. Counts against the brand's delivery rate " +
    "(429 past it).",
  security: apiKeySecurity,
  request: { params: IdParam },
  responses: {
    200: jsonResponse(
      z.object({
        ok: z.boolean(),
        status: z.number().int().nullable(),
        error: z.string().nullable(),
        deliveryId: z.string(),
        durationMs: z.number().int(),
      }),
      "How the receiver answered (`ok`: a 2xx)",
      { ok: true, status: 200, error: null, deliveryId: "test_01JQ2Z9A", durationMs: 84 },
    ),
    ...errorResponses(401, 403, 404, 405, 429, 503),
  },
});

const rotateSecret = createRoute({
  operationId: "rotateDestinationSecret",
  method: "post",
  path: "/cdp/destinations/{id}/rotate-secret",
  tags: ["Destinations"],
  summary: "Give the destination a new signing secret, shown once",
  description: "Deliveries are signed with the new secret from now on. The replaced one keeps " +
    "signing beside it for `overlapSeconds` (default a day, at most seven; 0 stops it at once): " +
    "`X-CDP-Signature` then carries a `v1` for each, the new one first, so the receiver can " +
    "switch to the new secret without refusing a delivery. A secret rotated out earlier stops.",
  security: apiKeySecurity,
  request: {
    params: IdParam,
    body: jsonBody(
      z.object({
        overlapSeconds: z.number().int().min(0).max(MAX_ROTATION_OVERLAP_SECONDS).optional()
          .openapi({ description: "How long the replaced secret keeps signing (default 86400)" }),
      }).strict(),
      { overlapSeconds: 3600 },
      { required: false },
    ),
  },
  responses: {
    200: jsonResponse(
      z.object({
        id: z.string(),
        secret: z.string(),
        previousSecretExpiresAt: z.string().nullable().openapi({
          description: "Until when the replaced secret signs too; null: it stopped at once",
        }),
        scope: z.string(),
      }),
      "Rotated; the new signing secret is in `secret`, only this once",
      {
        id: _DESTINATION.id,
        secret: "whsec_9Zx-1yAbCdEfGhIjKlMnOpQrStUvWxYz0123456789B",
        previousSecretExpiresAt: "2026-11-26T11:00:00.000Z",
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 404, 405, 503),
  },
});

const deliveries = createRoute({
  operationId: "listDestinationDeliveries",
  method: "get",
  path: "/cdp/destinations/{id}/deliveries",
  tags: ["Destinations"],
  summary: "The destination's deliveries, newest first: status, attempts, last error",
  security: apiKeySecurity,
  request: {
    params: IdParam,
    query: pageQuery.extend({
      status: z.enum(["pending", "delivered", "dead"]).optional().openapi({
        description: "Only the deliveries of this status",
        example: "dead",
      }),
    }),
  },
  responses: {
    200: jsonResponse(
      pageSchema(DeliverySchema).extend({ nextCursor: z.null(), scope: z.string() }),
      "A page of deliveries",
      {
        list: [{
          id: "dlv_01JQ2Z9B3V",
          status: "pending",
          count: 3,
          attempts: 2,
          lastStatus: 503,
          lastError: "HTTP 503",
          createdAt: "2026-11-26T10:00:01.000Z",
          nextAttemptAt: "2026-11-26T10:00:05.000Z",
          completedAt: null,
        }],
        totalSize: 1,
        offset: 0,
        pageSize: 25,
        nextCursor: null,
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 404, 405, 503),
  },
});

/** Destinations: define, list, read, update, delete, test, rotate the secret, deliveries. */
export function destinationRoutes(deps: AppDeps) {
  const settings = deps.config.destinations;
  const notFound = () => new HttpError(404, "not_found", "Destination not found");
  const deliveryDeps = { ...deps, settings };
  const find = async (scope: string, id: string): Promise<DestinationView> => {
    const found = await getDestination(deps.sql, scope, id);
    if (!found) throw notFound();
    return found;
  };

  return newRouter()
    .openapi(create, async (c) => {
      const scope = requireScope(c);
      const body = c.req.valid("json");
      const created = await createDestination(
        { ...deps, settings },
        { brandId: c.get("auth").brandId, scope },
        body,
      );
      return c.json({ ...created, scope }, 201);
    })
    .openapi(list, async (c) => {
      const scope = requireScope(c);
      const page = c.req.valid("query");
      assertWithinWindow(page);
      return c.json(
        { ...offsetPage(await listDestinations(deps.sql, scope, page), page), scope },
        200,
      );
    })
    .openapi(getOne, async (c) => {
      const scope = requireScope(c);
      return c.json(await find(scope, c.req.valid("param").id), 200);
    })
    .openapi(update, async (c) => {
      const scope = requireScope(c);
      const { id } = c.req.valid("param");
      const updated = await updateDestination(deliveryDeps, scope, id, c.req.valid("json"));
      if (!updated) throw notFound();
      return c.json(updated, 200);
    })
    .openapi(remove, async (c) => {
      const scope = requireScope(c);
      if (!await deleteDestination(deps.sql, scope, c.req.valid("param").id)) throw notFound();
      return c.body(null, 204);
    })
    .openapi(testRoute, async (c) => {
      const scope = requireScope(c);
      const outcome = await sendTestDelivery(deliveryDeps, scope, c.req.valid("param").id);
      if (!outcome) throw notFound();
      return c.json(outcome, 200);
    })
    .openapi(rotateSecret, async (c) => {
      const scope = requireScope(c);
      const overlap = c.req.valid("json")?.overlapSeconds ?? _DEFAULT_OVERLAP_SECONDS;
      const rotated = await rotateSigningSecret(deps, scope, c.req.valid("param").id, overlap);
      if (!rotated) throw notFound();
      return c.json({ ...rotated, scope }, 200);
    })
    .openapi(deliveries, async (c) => {
      const scope = requireScope(c);
      const destination = await find(scope, c.req.valid("param").id);
      const query = c.req.valid("query");
      assertWithinWindow(query);
      const page = await recentDeliveries(deps.sql, destination.id, query);
      return c.json({ ...offsetPage(page, query), scope }, 200);
    });
}
