/**
 * Routes of API key management (`/cdp/keys`), authenticated by Shopify session tokens.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import {
  type ApiKeyRecord,
  apiKeyView,
  deleteApiKey,
  issueApiKey,
  listApiKeys,
  revokeApiKey,
  rotateApiKey,
} from "../lib/tenancy/api_keys.ts";
import type { AppDeps } from "../lib/http/app_env.ts";
import { HttpError } from "../lib/http/errors.ts";
import {
  conflictResponse,
  errorResponses,
  jsonBody,
  jsonResponse,
  newRouter,
} from "../lib/http/openapi.ts";
import { assertWithinWindow, offsetPage, pageQuery } from "../lib/http/pagination.ts";

const sessionSecurity = [{ sessionToken: [] }];

const KeySchema = z.object({
  id: z.string().openapi({ example: "key_01KAB3M4Q9R8S7T6V5W4X3Y2Z1" }),
  name: z.string().nullable(),
  prefix: z.string().openapi({ example: "svc_hTnRG8" }),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
}).openapi("ApiKey");

const IssuedKeySchema = z.object({
  id: z.string(),
  key: z.string().openapi({ description: "The plaintext key: shown this once, never again" }),
  prefix: z.string(),
  name: z.string().nullable(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
  scope: z.string().nullable(),
}).openapi("IssuedApiKey");

const KeyIdBody = z.object({ id: z.string().min(1).max(64) }).strict();

const _KEY = {
  id: "key_01KAB3M4Q9R8S7T6V5W4X3Y2Z1",
  name: "backend",
  prefix: "svc_hTnRG8",
  created_at: "2026-11-21T12:00:00.000Z",
  last_used_at: "2026-11-21T12:30:00.000Z",
  expires_at: null,
  revoked_at: null,
};
const _ISSUED = {
  id: "key_01KAB3M4Q9R8S7T6V5W4X3Y2Z1",
  key: "svc_hTnRG8JwYndmZRKBecWlgGNgzWtlyS0Itfmp",
  prefix: "svc_hTnRG8",
  name: "backend",
  created_at: "2026-11-21T12:00:00.000Z",
  expires_at: null,
  scope: "acme.myshopify.com",
};

const issue = createRoute({
  operationId: "issueApiKey",
  method: "post",
  path: "/cdp/keys",
  tags: ["Keys"],
  summary: "Issue an API key",
  security: sessionSecurity,
  request: {
    body: {
      required: false,
      content: {
        "application/json": {
          schema: z.object({
            name: z.string().trim().min(1).max(100).optional(),
            expires_at: z.iso.datetime({ offset: true }).optional()
              .openapi({ description: "When the key stops working; none by default" }),
          }).strict(),
          example: { name: "backend", expires_at: "2027-11-21T00:00:00Z" },
        },
      },
    },
  },
  responses: {
    201: jsonResponse(IssuedKeySchema, "Issued; the plaintext is in `key`, only this once", {
      ..._ISSUED,
      expires_at: "2027-11-21T00:00:00.000Z",
    }),
    ...errorResponses(400, 401, 405, 429, 503),
  },
});

const list = createRoute({
  operationId: "listApiKeys",
  method: "get",
  path: "/cdp/keys",
  tags: ["Keys"],
  summary: "List the brand's API keys (metadata only)",
  security: sessionSecurity,
  request: { query: pageQuery },
  responses: {
    200: jsonResponse(
      z.object({
        list: z.array(KeySchema),
        totalSize: z.number().int(),
        offset: z.number().int(),
        pageSize: z.number().int(),
        nextCursor: z.null(),
        scope: z.string().nullable(),
      }),
      "Keys, oldest first; never a plaintext or a hash",
      {
        list: [_KEY],
        totalSize: 1,
        offset: 0,
        pageSize: 10,
        nextCursor: null,
        scope: "acme.myshopify.com",
      },
    ),
    ...errorResponses(400, 401, 405, 429, 503),
  },
});

const rotate = createRoute({
  operationId: "rotateApiKey",
  method: "post",
  path: "/cdp/keys/rotate",
  tags: ["Keys"],
  summary: "Replace a key; the old one keeps working for the grace period",
  description: "Issues a replacement with the same name and expiry; the old key works until " +
    "`previous.expires_at`. A key already rotated (in its grace period) is 409 `conflict` " +
    "naming its replacement: the replacement's plaintext was shown once and is not kept, and a " +
    "second replacement would stop with the grace.",
  security: sessionSecurity,
  request: { body: jsonBody(KeyIdBody, { id: _KEY.id }) },
  responses: {
    201: jsonResponse(
      IssuedKeySchema.extend({
        previous: z.object({ id: z.string(), expires_at: z.string() }),
      }),
      "The new key (plaintext once) and when the old one stops",
      {
        ..._ISSUED,
        id: "key_01KAB3P0000000000000000000",
        key: "svc_Q2x9LmTd0aVb7RkS1eYh4NwZc8UpJg3FoMi6",
        prefix: "svc_Q2x9Lm",
        created_at: "2026-11-22T09:00:00.000Z",
        previous: { id: _KEY.id, expires_at: "2026-11-23T09:00:00.000Z" },
      },
    ),
    ...errorResponses(400, 401, 404, 405, 429, 503),
    409: conflictResponse(
      "Key not live, or rotated already (a rotation is not repeated: rotate its replacement)",
      "The key is revoked or expired; issue a new one",
    ),
  },
});

const revoke = createRoute({
  operationId: "revokeApiKey",
  method: "post",
  path: "/cdp/keys/revoke",
  tags: ["Keys"],
  summary: "Revoke a key: it stops working at once",
  security: sessionSecurity,
  request: { body: jsonBody(KeyIdBody, { id: _KEY.id }) },
  responses: {
    200: jsonResponse(KeySchema, "The revoked key", {
      ..._KEY,
      revoked_at: "2026-11-22T09:00:00.000Z",
    }),
    ...errorResponses(400, 401, 404, 405, 429, 503),
  },
});

const remove = createRoute({
  operationId: "deleteApiKey",
  method: "delete",
  path: "/cdp/keys",
  tags: ["Keys"],
  summary: "Delete a key's record (revoke or let it expire first)",
  security: sessionSecurity,
  request: { query: z.object({ id: z.string().min(1).max(64).openapi({ example: _KEY.id }) }) },
  responses: {
    204: { description: "Deleted" },
    ...errorResponses(400, 401, 404, 405, 429, 503),
    409: conflictResponse("Key still live", "The key still works: revoke it first"),
  },
});

/** Key management, authenticated with a Shopify session token (see lib/http/auth.ts). */
export function keyRoutes(deps: AppDeps) {
  const notFound = () => new HttpError(404, "not_found", "Key not found");
  return newRouter()
    .openapi(issue, async (c) => {
      const auth = c.get("auth");
      const body = c.req.valid("json") ?? {};
      const expiresAt = body.expires_at ? new Date(body.expires_at) : null;
      if (expiresAt && expiresAt <= deps.now()) {
        throw new HttpError(400, "bad_request", "expires_at must be in the future");
      }
      const issued = await issueApiKey(deps, { brandId: auth.brandId, name: body.name, expiresAt });
      return c.json(_issued(issued.record, issued.key, auth.scope), 201);
    })
    .openapi(list, async (c) => {
      const auth = c.get("auth");
      const page = c.req.valid("query");
      assertWithinWindow(page);
      const records = await listApiKeys(deps.kv, auth.brandId);
      const list = records.slice(page.offset, page.offset + page.limit).map(apiKeyView);
      return c.json(
        { ...offsetPage({ list, total: records.length }, page), scope: auth.scope },
        200,
      );
    })
    .openapi(rotate, async (c) => {
      const auth = c.get("auth");
      const rotated = await rotateApiKey(deps, {
        brandId: auth.brandId,
        keyId: c.req.valid("json").id,
        graceMs: deps.config.keyRotationGraceSeconds * 1000,
      });
      if (rotated === null) throw notFound();
      if (rotated === "not_live") {
        throw new HttpError(409, "conflict", "The key is revoked or expired; issue a new one");
      }
      return c.json({
        ..._issued(rotated.record, rotated.key, auth.scope),
        previous: { id: rotated.previous.id, expires_at: rotated.previous.expires_at! },
      }, 201);
    })
    .openapi(revoke, async (c) => {
      const auth = c.get("auth");
      const revoked = await revokeApiKey(deps, {
        brandId: auth.brandId,
        keyId: c.req.valid("json").id,
      });
      if (!revoked) throw notFound();
      return c.json(apiKeyView(revoked), 200);
    })
    .openapi(remove, async (c) => {
      const auth = c.get("auth");
      const deleted = await deleteApiKey(deps, {
        brandId: auth.brandId,
        keyId: c.req.valid("query").id,
      });
      if (deleted === null) throw notFound();
      if (deleted === "live") {
        throw new HttpError(409, "conflict", "The key still works: revoke it first");
      }
      return c.body(null, 204);
    });
}

function _issued(record: ApiKeyRecord, key: string, scope: string | null) {
  return {
    id: record.id,
    key,
    prefix: record.prefix,
    name: record.name,
    created_at: record.created_at,
    expires_at: record.expires_at,
    scope,
  };
}
