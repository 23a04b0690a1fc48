/**
 * Profile routes: the profile list, one profile, its events and its sessions.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { AppDeps } from "../lib/http/app_env.ts";
import { requireScope } from "../lib/http/auth.ts";
import { keysetStart, nextKeysetCursor } from "../lib/http/cursors.ts";
import {
  EVENT_SORTS,
  findProfile,
  identityOf,
  listProfileEvents,
  listProfiles,
  listProfileSessions,
  PROFILE_SORTS,
  profileIds,
} from "../lib/engine/profiles.ts";
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
  cursorParam,
  limitParam,
  offsetParam,
  pageEnvelope,
  pageSchema,
} from "../lib/http/pagination.ts";

const ProfileSchema = z.object({
  itemId: z.string(),
  properties: z.record(z.string(), z.unknown()),
  provenance: z.enum(["server", "pixel", "merged"]),
  consents: z.record(z.string(), z.unknown()).optional().openapi({
    description: "One profile's read only: Unomi's consents map by type identifier " +
      "({scope, typeIdentifier, status, statusDate, revokeDate}), kept by modifyConsent events",
  }),
}).openapi("Profile");

const EventSchema = z.object({
  itemId: z.string(),
  eventType: z.string(),
  profileId: z.string(),
  sessionId: z.string(),
  timeStamp: z.string(),
  properties: z.record(z.string(), z.unknown()),
  flattenedProperties: z.record(z.string(), z.unknown()),
  target: z.record(z.string(), z.unknown()).nullable(),
  source: z.enum(["server", "pixel"]),
  scope: z.string(),
}).openapi("Event");

const SessionSchema = z.object({
  itemId: z.string(),
  profileId: z.string(),
  firstEventAt: z.string(),
  lastEventAt: z.string(),
  eventCount: z.number().int(),
  properties: z.record(z.string(), z.unknown()).openapi({
    description: "From the context (`properties.context`) of the session's earliest event that " +
      "has one, under Apache Unomi's session property names where it has one: landingPageURL, " +
      "landingPagePath, referringURL, utmSource, utmMedium, utmCampaign, utmTerm, utmContent, " +
      "userAgentName, userAgentVersion, userAgentNameAndVersion, operatingSystemName, " +
      "deviceCategory (desktop, mobile, tablet), locale; empty without a context. Selectable " +
      "with sessionPropertyCondition on properties.<name>. Without a caller's sessionId, a " +
      "session is the profile's events with gaps under 30 minutes (docs/integrations.md).",
  }),
}).openapi("Session");

const IdParam = idParam(
  "A profile id (its own or one merged into it)",
  255,
  "store_acme_207119551",
);

const _SCOPE = "acme.myshopify.com";
const _PROFILE = {
  itemId: "store_acme_207119551",
  properties: {
    email: "bob@example.com",
    firstName: "Bob",
    shopDomain: _SCOPE,
    firstVisit: "2026-11-21T12:00:00.000Z",
    lastVisit: "2026-11-21T12:04:10.000Z",
    nbOfVisits: 1,
  },
  provenance: "server",
};
const _IDENTITY = { email: "bob@example.com", firstName: "Bob", shopDomain: _SCOPE };
const _EVENT = {
  itemId: "01KAB3M4Q9R8S7T6V5W4X3Y2Z1",
  eventType: "page_viewed",
  profileId: "store_acme_207119551",
  sessionId: "01KAB3M4Q9R8S7T6V5W4X3Y2Z0",
  timeStamp: "2026-11-21T12:04:10.000Z",
  properties: { url: "https://acme.myshopify.com/" },
  flattenedProperties: { url: "https://acme.myshopify.com/" },
  target: null,
  source: "server",
  scope: _SCOPE,
};

const list = createRoute({
  operationId: "listProfiles",
  method: "get",
  path: "/cdp/profiles",
  tags: ["Profiles"],
  summary: "List profiles of one bucket",
  security: apiKeySecurity,
  request: {
    query: z.object({
      bucket: z.enum(["customers", "anonymous", "merged"]).default("customers").openapi({
        description: "customers = provenance server, anonymous = pixel, merged = merged",
        example: "customers",
      }),
      q: z.string().trim().min(1).max(200).optional().openapi({
        description: "Case-insensitive substring of the id, email, names, phone or customer id",
        example: "bob@",
      }),
      limit: limitParam(),
      offset: offsetParam,
      cursor: cursorParam,
      sort: z.enum(Object.keys(PROFILE_SORTS) as [keyof typeof PROFILE_SORTS]).default(
        "itemId.keyword:asc",
      ).openapi({
        description: "Only the default sort mints cursors; others page by offset",
        example: "itemId.keyword:asc",
      }),
    }),
  },
  responses: {
    200: jsonResponse(
      pageSchema(ProfileSchema).extend({
        bucket: z.string(),
        identities: z.record(z.string(), z.record(z.string(), z.unknown())),
        scope: z.string(),
      }),
      "A page of profiles and their identity projections",
      {
        list: [_PROFILE],
        totalSize: 1,
        offset: 0,
        pageSize: 10,
        nextCursor: null,
        bucket: "customers",
        identities: { store_acme_207119551: _IDENTITY },
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 405),
  },
});

const getOne = createRoute({
  operationId: "getProfile",
  method: "get",
  path: "/cdp/profiles/{id}",
  tags: ["Profiles"],
  summary: "Get a profile (by its id or any id merged into it)",
  security: apiKeySecurity,
  request: { params: IdParam },
  responses: {
    200: jsonResponse(
      z.object({
        profile: ProfileSchema,
        identity: z.record(z.string(), z.unknown()),
        scope: z.string(),
      }),
      "The profile",
      { profile: _PROFILE, identity: _IDENTITY, scope: _SCOPE },
    ),
    ...errorResponses(400, 401, 403, 404, 405),
  },
});

const events = createRoute({
  operationId: "listProfileEvents",
  method: "get",
  path: "/cdp/profiles/{id}/events",
  tags: ["Profiles"],
  summary: "A profile's events (this brand's only)",
  security: apiKeySecurity,
  request: {
    params: IdParam,
    query: z.object({
      eventType: z.string().min(1).max(64).optional().openapi({ example: "page_viewed" }),
      from: z.iso.datetime({ offset: true }).optional()
        .openapi({ description: "Inclusive", example: "2026-11-01T00:00:00Z" }),
      to: z.iso.datetime({ offset: true }).optional()
        .openapi({ description: "Inclusive", example: "2026-11-30T23:59:59Z" }),
      limit: limitParam(),
      offset: offsetParam,
      cursor: cursorParam,
      sort: z.enum(Object.keys(EVENT_SORTS) as [keyof typeof EVENT_SORTS]).default(
        "itemId.keyword:asc",
      ).openapi({ example: "itemId.keyword:asc" }),
    }),
  },
  responses: {
    200: jsonResponse(
      pageSchema(EventSchema).extend({ scope: z.string() }),
      "A page of events",
      { list: [_EVENT], totalSize: 1, offset: 0, pageSize: 10, nextCursor: null, scope: _SCOPE },
    ),
    ...errorResponses(400, 401, 403, 404, 405),
  },
});

const sessions = createRoute({
  operationId: "listProfileSessions",
  method: "get",
  path: "/cdp/profiles/{id}/sessions",
  tags: ["Profiles"],
  summary: "A profile's sessions, most recent first",
  security: apiKeySecurity,
  request: { params: IdParam, query: z.object({ limit: limitParam(), offset: offsetParam }) },
  responses: {
    200: jsonResponse(
      pageSchema(SessionSchema).extend({ scope: z.string() }),
      "A page of sessions",
      {
        list: [{
          itemId: "store_acme_207119551:2026-11-21T12:00:00.000Z",
          profileId: "store_acme_207119551",
          firstEventAt: "2026-11-21T12:00:00.000Z",
          lastEventAt: "2026-11-21T12:04:10.000Z",
          eventCount: 3,
          properties: {
            landingPageURL: "https://acme.example/?utm_source=news&utm_campaign=fall",
            landingPagePath: "/",
            referringURL: "https://www.google.com/",
            utmSource: "news",
            utmCampaign: "fall",
            userAgentName: "Chrome",
            userAgentVersion: "131.0.0.0",
            userAgentNameAndVersion: "Chrome@@131.0.0.0",
            operatingSystemName: "macOS",
            deviceCategory: "desktop",
          },
        }],
        totalSize: 1,
        offset: 0,
        pageSize: 10,
        nextCursor: null,
        scope: _SCOPE,
      },
    ),
    ...errorResponses(400, 401, 403, 404, 405),
  },
});

/** Profiles, their events and sessions. */
export function profileRoutes(deps: AppDeps) {
  const cursorDeps = { kv: deps.kv, now: deps.now, ttlMs: deps.config.cursorTtlSeconds * 1000 };
  const notFound = () => new HttpError(404, "not_found", "Profile not found");

  return newRouter()
    .openapi(list, async (c) => {
      const scope = requireScope(c);
      const query = c.req.valid("query");
      const binding = {
        brandId: c.get("auth").brandId,
        route: "/cdp/profiles",
        resource: JSON.stringify([query.bucket, query.q ?? null]),
      };
      const keyset = query.sort === "itemId.keyword:asc";
      const { after, offset } = await keysetStart(cursorDeps, query, binding, keyset);
      const page = await listProfiles(deps.sql, scope, { ...query, offset, after });
      const nextCursor = await nextKeysetCursor(cursorDeps, binding, {
        more: page.more,
        lastId: page.list.at(-1)?.itemId,
        offset,
        count: page.list.length,
      }, keyset);
      const identities = Object.fromEntries(
        page.list.map((p) => [p.itemId, identityOf(p.properties)]),
      );
      return c.json({
        bucket: query.bucket,
        ...pageEnvelope({
          list: page.list,
          totalSize: page.total,
          offset,
          limit: query.limit,
          nextCursor,
        }),
        identities,
        scope,
      }, 200);
    })
    .openapi(getOne, async (c) => {
      const scope = requireScope(c);
      const profile = await findProfile(deps.sql, scope, c.req.valid("param").id);
      if (!profile) throw notFound();
      return c.json({ profile, identity: identityOf(profile.properties), scope }, 200);
    })
    .openapi(events, async (c) => {
      const scope = requireScope(c);
      const profile = await findProfile(deps.sql, scope, c.req.valid("param").id);
      if (!profile) throw notFound();
      const query = c.req.valid("query");
      const binding = {
        brandId: c.get("auth").brandId,
        route: "/cdp/profiles/:id/events",
        resource: JSON.stringify([
          profile.itemId,
          query.eventType ?? null,
          query.from ?? null,
          query.to ?? null,
        ]),
      };
      const keyset = query.sort === "itemId.keyword:asc";
      const { after, offset } = await keysetStart(cursorDeps, query, binding, keyset);
      const page = await listProfileEvents(
        deps.sql,
        scope,
        await profileIds(deps.sql, scope, profile.itemId),
        {
          ...query,
          from: query.from ? new Date(query.from) : undefined,
          to: query.to ? new Date(query.to) : undefined,
          offset,
          after,
        },
      );
      const nextCursor = await nextKeysetCursor(cursorDeps, binding, {
        more: page.more,
        lastId: page.list.at(-1)?.itemId,
        offset,
        count: page.list.length,
      }, keyset);
      return c.json({
        ...pageEnvelope({
          list: page.list,
          totalSize: page.total,
          offset,
          limit: query.limit,
          nextCursor,
        }),
        scope,
      }, 200);
    })
    .openapi(sessions, async (c) => {
      const scope = requireScope(c);
      const profile = await findProfile(deps.sql, scope, c.req.valid("param").id);
      if (!profile) throw notFound();
      const page = c.req.valid("query");
      assertWithinWindow(page);
      const result = await listProfileSessions(deps.sql, scope, profile.itemId, page);
      return c.json({
        ...pageEnvelope({
          list: result.list,
          totalSize: result.total,
          offset: page.offset,
          limit: page.limit,
        }),
        scope,
      }, 200);
    });
}
