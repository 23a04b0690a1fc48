/**
 * Data-subject requests (`/cdp/privacy/requests`): erase, export, suppress and unsuppress a
 * person of the brand, their state and counts, and an export's document (docs/privacy.md).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
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
import {
  assertWithinWindow,
  limitParam,
  offsetPage,
  offsetParam,
  pageSchema,
} from "../lib/http/pagination.ts";
import {
  createRequest,
  exportDocument,
  getRequest,
  listRequests,
  PRIVACY_REQUEST_STATUSES,
  PRIVACY_REQUEST_TYPES,
} from "../lib/privacy/requests.ts";

const _IDENTIFIER_DESCRIPTION = "Who: classified as GET /cdp/customers/{identifier} does (`@`: " +
  "email; leading `+`: E.164 phone; all digits: storefront customer id; otherwise a profile id, " +
  "its own or one merged into it, or a contact id)";

const CreatedSchema = z.object({
  id: z.string(),
  type: z.enum(PRIVACY_REQUEST_TYPES),
  status: z.enum(PRIVACY_REQUEST_STATUSES),
  identifier: z.string().nullable(),
  created_at: z.string(),
}).openapi("PrivacyRequestCreated");

const RequestSchema = CreatedSchema.extend({
  requested_by: z.string().openapi({ description: "`key:<key id>`, `shopify:<topic>`" }),
  started_at: z.string().nullable(),
  completed_at: z.string().nullable(),
  counts: z.record(z.string(), z.number().int()).openapi({
    description: "What was found and removed, exported or blocked; `dropped` (erase, " +
      "suppress): events dropped before they were stored",
  }),
  error: z.string().nullable(),
  download_available: z.boolean(),
}).openapi("PrivacyRequest");

const _CREATED = {
  id: "01KAB3M4Q9R8S7T6V5W4X3Y2Z1",
  type: "erase",
  status: "pending",
  identifier: "bob@example.com",
  created_at: "2026-11-21T12:00:00.000Z",
};
const _REQUEST = {
  ..._CREATED,
  status: "completed",
  identifier: null,
  requested_by: "key:key_01KAB3M4Q9R8S7T6V5W4X3Y2Z0",
  started_at: "2026-11-21T12:00:00.150Z",
  completed_at: "2026-11-21T12:00:00.420Z",
  counts: {
    profiles: 1,
    aliases: 1,
    events: 212,
    sessions: 9,
    contacts: 1,
    orders_unlinked: 3,
    subscriptions_unlinked: 0,
    dropped: 2,
  },
  error: null,
  download_available: false,
};

const create = createRoute({
  operationId: "createPrivacyRequest",
  method: "post",
  path: "/cdp/privacy/requests",
  tags: ["Privacy"],
  summary: "Ask to erase, export, suppress or unsuppress a person",
  description: "Processed in the background; poll the request. A person nobody knows completes " +
    "with zero counts.",
  security: apiKeySecurity,
  request: {
    body: jsonBody(
      z.object({
        type: z.enum(PRIVACY_REQUEST_TYPES),
        identifier: z.string().trim().min(1).max(320).openapi({
          description: _IDENTIFIER_DESCRIPTION,
        }),
      }).strict(),
      { type: "erase", identifier: "bob@example.com" },
    ),
  },
  responses: {
    202: jsonResponse(CreatedSchema, "Recorded and queued", _CREATED),
    ...errorResponses(400, 401, 403, 405, 429),
  },
});

const list = createRoute({
  operationId: "listPrivacyRequests",
  method: "get",
  path: "/cdp/privacy/requests",
  tags: ["Privacy"],
  summary: "The brand's requests, newest first",
  security: apiKeySecurity,
  request: {
    query: z.object({
      limit: limitParam(),
      offset: offsetParam,
      type: z.enum(PRIVACY_REQUEST_TYPES).optional().openapi({ example: "export" }),
    }),
  },
  responses: {
    200: jsonResponse(
      pageSchema(RequestSchema).extend({ scope: z.string(), nextCursor: z.null() }),
      "A page of requests",
      {
        list: [_REQUEST],
        totalSize: 1,
        offset: 0,
        pageSize: 25,
        nextCursor: null,
        scope: "acme.myshopify.com",
      },
    ),
    ...errorResponses(400, 401, 403, 405, 429),
  },
});

const getOne = createRoute({
  operationId: "getPrivacyRequest",
  method: "get",
  path: "/cdp/privacy/requests/{id}",
  tags: ["Privacy"],
  summary: "One request: status and counts",
  security: apiKeySecurity,
  request: { params: idParam("The request's id", 64, _CREATED.id) },
  responses: {
    200: jsonResponse(RequestSchema, "The request", _REQUEST),
    ...errorResponses(400, 401, 403, 404, 405, 429),
  },
});

const download = createRoute({
  operationId: "downloadPrivacyExport",
  method: "get",
  path: "/cdp/privacy/requests/{id}/download",
  tags: ["Privacy"],
  summary: "A completed export's document",
  description: "One JSON document: profiles (with consents and merged ids), events, sessions, " +
    "segment memberships, contacts, orders with their lines, subscriptions. 409 while the " +
    "export is not completed, or for another type of request; 404 once the person was erased.",
  security: apiKeySecurity,
  request: { params: idParam("The export request's id", 64, _CREATED.id) },
  responses: {
    200: jsonResponse(z.record(z.string(), z.unknown()), "The document", {
      scope: "acme.myshopify.com",
      exported_at: "2026-11-21T12:00:01.000Z",
      profiles: [{ id: "store_acme_207119551", merged_ids: [], segments: [], consents: {} }],
      sessions: [],
      contacts: [],
      orders: [],
      subscriptions: [],
      events: [],
    }),
    ...errorResponses(400, 401, 403, 404, 405, 409, 429),
  },
});

/** The privacy request routes. */
export function privacyRoutes(deps: AppDeps) {
  const hasher = deps.hasher;
  return newRouter()
    .openapi(create, async (c) => {
      const scope = requireScope(c);
      const auth = c.get("auth");
      const body = c.req.valid("json");
      const created = await createRequest(
        { ...deps, hasher: await hasher() },
        {
          brandId: auth.brandId,
          scope,
          type: body.type,
          identifier: body.identifier,
          requestedBy: `key:${auth.keyId}`,
        },
      );
      const { id, type, status, identifier, created_at } = created;
      return c.json({ id, type, status, identifier, created_at }, 202);
    })
    .openapi(list, async (c) => {
      const scope = requireScope(c);
      const query = c.req.valid("query");
      assertWithinWindow(query);
      const result = await listRequests(deps.sql, c.get("auth").brandId, query);
      return c.json({ ...offsetPage(result, query), scope }, 200);
    })
    .openapi(getOne, async (c) => {
      requireScope(c);
      const found = await getRequest(deps.sql, c.get("auth").brandId, c.req.valid("param").id);
      if (!found) throw new HttpError(404, "not_found", "Privacy request not found");
      return c.json(found, 200);
    })
    .openapi(download, async (c) => {
      requireScope(c);
      const brandId = c.get("auth").brandId;
      const id = c.req.valid("param").id;
      const document = await exportDocument(deps.sql, brandId, id);
      if (document === null) {
        const found = await getRequest(deps.sql, brandId, id);
        if (!found || (found.type === "export" && found.status === "completed")) {
          throw new HttpError(404, "not_found", "Export not found");
        }
        throw new HttpError(409, "conflict", "Only a completed export has a document");
      }
      // Already JSON text: sent as stored, not parsed and written again.
      return c.body(document, 200, { "Content-Type": "application/json" }) as never;
    });
}
