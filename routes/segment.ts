/**
 * The Segment-compatible Tracking API (`/v1/*`): the doors Segment's and RudderStack's SDKs post
 * to, on the one ingest pipeline (`validateBuiltEvents` at the edge, then `acceptEvents`), and
 * the settings document analytics.js loads. The messages' mapping is lib/ingest/segment_spec.ts.
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { z as zod } from "zod";
import type { Context, MiddlewareHandler } from "hono";
import type { AppDeps } from "../lib/http/app_env.ts";
import { bearerToken, requireScope } from "../lib/http/auth.ts";
import { readBodyWithin } from "../lib/http/body_limit.ts";
import { HttpError } from "../lib/http/errors.ts";
import type { IngestEvent } from "../lib/engine/engine.ts";
import { type AcceptedEvent, type Rejection, validateBuiltEvents } from "../lib/ingest/edge.ts";
import { acceptEvents } from "../lib/ingest/accept.ts";
import { recordRejectedMessages } from "../lib/ingest/rejected_messages.ts";
import {
  MAX_SEGMENT_MESSAGE_BYTES,
  MAX_SEGMENT_REQUEST_BYTES,
  parseSegmentMessage,
  SEGMENT_ROUTE_TYPES,
  SEGMENT_TRACK_NAMES,
  segmentEventId,
  type SegmentType,
} from "../lib/ingest/segment_spec.ts";
import { jsonPath } from "../lib/ingest/storable.ts";
import { decodeUtf8Body } from "../lib/utf8.ts";
import { apiKeySecurity, errorResponses, jsonResponse, newRouter } from "../lib/http/openapi.ts";
import { meterInto } from "../lib/http/usage.ts";

/** Paths of the Segment door that take a credential and a body. */
export const SEGMENT_POST_PATHS = [
  "/v1/batch",
  "/v1/b",
  ...Object.keys(SEGMENT_ROUTE_TYPES).map((name) => `/v1/${name}`),
];

/** Messages per batch: Segment bounds a batch by bytes only, this bounds the work per request. */
export const MAX_SEGMENT_BATCH = 2_000;

const _invalid = (message: string) => new HttpError(400, "bad_request", message);

/**
 * Reads a Segment request's body into `c.var.body`: at most 500 KB once inflated (a gzip body,
 * `Content-Encoding: gzip`, is inflated under that bound), any Content-Type (analytics.js sends
 * `text/plain`). Over the bound: 400, as Segment answers.
 */
export function segmentBody(deps: Pick<AppDeps, "config">): MiddlewareHandler {
  return async function segmentBodyMiddleware(c, next) {
    let bytes: Uint8Array | null;
    try {
      bytes = await readBodyWithin(
        c.req.raw,
        MAX_SEGMENT_REQUEST_BYTES,
        deps.config.bodyReadTimeoutMs,
      );
    } catch (err) {
      if (err instanceof HttpError && err.status === 413) {
        throw _invalid(`request exceeds ${MAX_SEGMENT_REQUEST_BYTES} bytes`);
      }
      throw err;
    }
    const encoding = (c.req.header("content-encoding") ?? "").trim().toLowerCase();
    if (bytes && encoding === "gzip") bytes = await _gunzip(bytes, MAX_SEGMENT_REQUEST_BYTES);
    else if (encoding !== "" && encoding !== "identity") {
      throw _invalid(`unsupported Content-Encoding: ${encoding}`);
    }
    c.set("body", bytes);
    await next();
  };
}

// Inflates a gzip body, refusing (400) past `max` bytes out: a small bomb cannot fill memory.
async function _gunzip(bytes: Uint8Array, max: number): Promise<Uint8Array> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  );
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > max) {
        await reader.cancel().catch(() => {});
        throw _invalid(`request exceeds ${max} bytes once inflated`);
      }
      chunks.push(value);
    }
  } catch (err) {
    if (err instanceof HttpError) throw err;
    throw _invalid("body is not valid gzip");
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

const _CHALLENGE = { "WWW-Authenticate": 'Basic realm="cdp"' };

/**
 * The API key of a Segment request: the Basic username (the password is empty), our Bearer
 * header, or the body's `writeKey` (analytics.js). None: 401.
 */
export function segmentCredential(c: Context): string {
  const header = c.req.header("authorization") ?? "";
  const basic = header.match(/^Basic\s+(\S+)\s*$/i);
  if (basic) {
    let decoded = "";
    try {
      decoded = atob(basic[1]!);
    } catch {
      throw new HttpError(401, "unauthorized", "Malformed Basic credential", {
        headers: _CHALLENGE,
      });
    }
    const user = decoded.split(":")[0] ?? "";
    if (user !== "") return user;
  } else if (/^Bearer\s/i.test(header)) {
    return bearerToken(c);
  }
  const body: Uint8Array | null = c.get("body");
  if (body) {
    try {
      const value = JSON.parse(decodeUtf8Body(body));
      if (typeof value?.writeKey === "string" && value.writeKey !== "") return value.writeKey;
    } catch {
      // Not JSON: no writeKey in it; the handler answers the body's problem once authenticated.
    }
  }
  throw new HttpError(
    401,
    "unauthorized",
    "Missing credential: HTTP Basic with the API key as username, writeKey, or Bearer",
    { headers: _CHALLENGE },
  );
}

// Plain JSON Schemas document the bodies without validating them: the handler reads the bytes
// itself (gzip, any Content-Type) and refuses messages one by one.
const _jsonSchema = (schema: zod.ZodType) =>
  zod.toJSONSchema(schema, { target: "draft-2020-12" }) as never;

const _message = zod.object({
  type: zod.enum(["track", "identify", "page", "screen", "group", "alias"]).optional(),
  messageId: zod.string().optional(),
  userId: zod.string().optional(),
  anonymousId: zod.string().optional(),
  event: zod.string().optional(),
  properties: zod.record(zod.string(), zod.unknown()).optional(),
  traits: zod.record(zod.string(), zod.unknown()).optional(),
  timestamp: zod.string().optional(),
  sentAt: zod.string().optional(),
  context: zod.record(zod.string(), zod.unknown()).optional(),
}).loose();

const _SUCCESS = z.object({
  success: z.literal(true),
  rejected: z.array(z.object({
    index: z.number().int(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })),
  })).optional().openapi({
    description: "Messages refused inside the accepted request, with their reasons (absent " +
      "when none was)",
  }),
}).openapi("SegmentSuccess");

const _MAPPING = "Mapping: `userId` is the profile (server provenance); only `anonymousId`: an " +
  "anonymous profile; both, and `alias` (previousId → userId): the anonymous profile merged into " +
  "the user's. identify: traits → profile properties (email, firstName/first_name, " +
  "lastName/last_name, phone → phoneNumber, address.city → city, address.country → countryName, " +
  "address.postalCode → zipCode; others under their names). track: e-commerce spec v2 names → " +
  `catalog types (${
    Object.entries(SEGMENT_TRACK_NAMES).map(([k, v]) => `${k} → ${v}`).join(", ")
  }); any other name → \`track\` with \`properties.event\` = the name. page → page_viewed, ` +
  "screen → screen_viewed, group → properties.groupId and properties.groupTraits. messageId is " +
  "the event id (a message sent twice is stored once); the time is receivedAt − (sentAt − " +
  "timestamp|originalTimestamp); context is kept in the event's properties.context, and a " +
  "session takes its properties (referringURL, landing page, UTM fields, userAgentName, " +
  "operatingSystemName, deviceCategory, ...) from its first event's; without a sessionId, a " +
  "session is the profile's events with gaps under 30 minutes. " +
  "See docs/integrations.md.";

const _AUTH = "Credential: HTTP Basic with the API key as username and an empty password, " +
  "`writeKey` in the body, or `Authorization: Bearer`. Missing or wrong: 401 (Segment answers " +
  "200). Body: JSON (any Content-Type, text/plain included), gzip allowed, at most 500 KB " +
  "inflated (else 400); a message at most 32 KB (else it alone is refused).";

function _singleRoute(path: string, type: SegmentType) {
  return createRoute({
    operationId: _operationId(path),
    method: "post",
    path,
    tags: ["Segment"],
    summary: `Segment ${type} (${path})`,
    description: `${_AUTH} ${_MAPPING}`,
    security: [...apiKeySecurity, { segmentBasic: [] }],
    request: {
      body: {
        required: true,
        content: {
          "application/json": {
            schema: _jsonSchema(_message),
            example: {
              userId: "97980cfea0067",
              event: "Order Completed",
              properties: { order_id: "50314b8e9bcf000000000000", total: 27.5, currency: "USD" },
              messageId: "ajs-next-5e2b1c0f",
              timestamp: "2026-11-26T09:00:00.000Z",
              sentAt: "2026-11-26T09:00:01.000Z",
            },
          },
        },
      },
    },
    responses: {
      200: jsonResponse(_SUCCESS, "Accepted", { success: true }),
      ...errorResponses(400, 401, 403, 408, 429, 503),
    },
  });
}

// `/v1/track` → segmentTrack, `/v1/t` → segmentT.
function _operationId(path: string): string {
  const name = path.slice("/v1/".length);
  return `segment${name[0]!.toUpperCase()}${name.slice(1)}`;
}

const _batchRoute = (path: string) =>
  createRoute({
    operationId: _operationId(path),
    method: "post",
    path,
    tags: ["Segment"],
    summary: `Segment batch (${path})`,
    description: `${_AUTH} A batch's \`sentAt\` and \`context\` apply to each of its messages; ` +
      `at most ${MAX_SEGMENT_BATCH} messages. One invalid or oversized message is refused ` +
      `alone: listed in \`rejected\`, and counted and kept with its reasons for the operator ` +
      `(the dashboard's health page, \`deno task admin rejected list\`). ${_MAPPING}`,
    security: [...apiKeySecurity, { segmentBasic: [] }],
    request: {
      body: {
        required: true,
        content: {
          "application/json": {
            schema: _jsonSchema(zod.object({
              batch: zod.array(_message),
              sentAt: zod.string().optional(),
              context: zod.record(zod.string(), zod.unknown()).optional(),
              writeKey: zod.string().optional(),
            })),
            example: {
              batch: [
                { type: "identify", userId: "u1", traits: { email: "peter@example.com" } },
                { type: "track", userId: "u1", event: "Product Viewed" },
              ],
              sentAt: "2026-11-26T09:00:01.000Z",
            },
          },
        },
      },
    },
    responses: {
      200: jsonResponse(_SUCCESS, "Accepted", { success: true }),
      ...errorResponses(400, 401, 403, 408, 429, 503),
    },
  });

const settingsRoute = createRoute({
  operationId: "segmentSettings",
  method: "get",
  path: "/v1/projects/{writeKey}/settings",
  tags: ["Segment"],
  summary: "analytics.js settings document",
  description: "What analytics.js loads from its CDN (set `cdnURL` to this service): its " +
    "`Segment.io` integration points back here (`apiHost`, `protocol`). No credential: the " +
    "document holds nothing but the key given in the path.",
  security: [],
  request: {
    params: z.object({
      writeKey: z.string().min(1).max(200).openapi({ example: "svc_0123456789abcdef" }),
    }),
  },
  responses: {
    200: jsonResponse(
      z.object({
        integrations: z.record(z.string(), z.unknown()),
        plan: z.record(z.string(), z.unknown()),
      }).loose(),
      "The settings",
      {
        integrations: {
          "Segment.io": { apiKey: "svc_...", apiHost: "cdp.example.com/v1", protocol: "https" },
        },
        plan: { track: { __default: { enabled: true } } },
      },
    ),
    ...errorResponses(400),
  },
});

/** The Segment-compatible routes. */
export function segmentApiRoutes(deps: AppDeps) {
  const router = newRouter();
  for (const [name, type] of Object.entries(SEGMENT_ROUTE_TYPES)) {
    router.openapi(_singleRoute(`/v1/${name}`, type), (c) => _ingest(deps, c, type));
  }
  for (const path of ["/v1/batch", "/v1/b"]) {
    router.openapi(_batchRoute(path), (c) => _ingest(deps, c, undefined));
  }
  router.openapi(settingsRoute, (c) => {
    const { writeKey } = c.req.valid("param");
    const url = new URL(c.req.url);
    const forwarded = deps.config.trustProxy
      ? c.req.header("x-forwarded-proto")?.split(",")[0]?.trim()
      : undefined;
    const protocol = forwarded === "http" || forwarded === "https"
      ? forwarded
      : url.protocol.replace(":", "");
    return c.json({
      integrations: {
        "Segment.io": {
          apiKey: writeKey,
          apiHost: `${url.host}/v1`,
          protocol,
          unbundledIntegrations: [],
          addBundledMetadata: true,
        },
      },
      plan: { track: { __default: { enabled: true, integrations: {} } }, identify: {}, group: {} },
      enabledMiddleware: {},
      metrics: { sampleRate: 0 },
      middlewareSettings: {},
      remotePlugins: [],
    }, 200);
  });
  return router;
}

// deno-lint-ignore no-explicit-any
async function _ingest(deps: AppDeps, c: Context<any>, type: SegmentType | undefined) {
  const scope = requireScope(c);
  const auth = c.get("auth");
  const raw: Uint8Array | null = c.get("body");
  let body: unknown;
  try {
    body = JSON.parse(raw ? decodeUtf8Body(raw) : "");
  } catch {
    throw _invalid("body is not valid JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw _invalid("body must be a JSON object");
  }
  const envelope = body as Record<string, unknown>;
  let messages: unknown[];
  if (type === undefined) {
    if (!Array.isArray(envelope.batch)) throw _invalid("$.batch must be an array");
    if (envelope.batch.length > MAX_SEGMENT_BATCH) {
      throw _invalid(`at most ${MAX_SEGMENT_BATCH} messages per batch`);
    }
    messages = envelope.batch;
  } else messages = [envelope];
  const receivedAt = deps.now();
  const shared = type === undefined ? envelope : {};
  const sharedContext = _record(shared.context);
  const built: { index: number; event: IngestEvent; source: "server" | "pixel" }[] = [];
  const rejected: Rejection[] = [];
  for (let index = 0; index < messages.length; index++) {
    let message = messages[index];
    const path = type === undefined ? ["batch", index] : [];
    if (JSON.stringify(message ?? null).length > MAX_SEGMENT_MESSAGE_BYTES) {
      rejected.push({
        index,
        errors: [{
          path: jsonPath(path),
          message: `message exceeds ${MAX_SEGMENT_MESSAGE_BYTES} bytes`,
        }],
      });
      continue;
    }
    if (typeof message === "object" && message !== null && !Array.isArray(message)) {
      const own = message as Record<string, unknown>;
      // A batch's sentAt and context apply to each of its messages (as Segment's).
      message = {
        ...own,
        sentAt: own.sentAt ?? shared.sentAt,
        context: sharedContext ? { ...sharedContext, ..._record(own.context) } : own.context,
      };
    }
    const parsed = parseSegmentMessage(message, {
      receivedAt,
      type,
      check: deps.engine.checkEvent,
    });
    if (!parsed.ok) {
      rejected.push({
        index,
        errors: parsed.errors.map((e) => ({
          path: e.path.replace(/^\$/, jsonPath(path)),
          message: e.message,
        })),
      });
      continue;
    }
    const id = await segmentEventId(parsed.message.messageId) ?? deps.newId();
    for (const event of parsed.mapped.events) {
      built.push({ index, event: { id, ...event }, source: parsed.mapped.source });
    }
  }
  const sourceOf = new Map(built.map((b) => [b.event.id, b.source]));
  const validated = validateBuiltEvents(built, deps.engine.checkEvent);
  rejected.push(...validated.rejected);
  rejected.sort((a, b) => a.index - b.index);
  const bySource: Record<"server" | "pixel", AcceptedEvent[]> = { server: [], pixel: [] };
  for (const a of validated.accepted) bySource[sourceOf.get(a.event.id) ?? "server"].push(a);
  // The request's usage record goes with the first commit. A batch split over two commits may be
  // half queued when the second fails: the caller's retry is stored once (ids from messageId).
  let metered = false;
  for (const source of ["server", "pixel"] as const) {
    if (bySource[source].length === 0) continue;
    const { folded } = await acceptEvents(
      deps,
      { brandId: auth.brandId, scope },
      source,
      bySource[source],
      metered ? {} : { also: (op) => meterInto(c, op, 200, deps.now()) },
    );
    if (folded) {
      metered = true;
      const meter = c.get("meter");
      if (meter) meter.done = true;
    }
  }
  if (rejected.length > 0) {
    deps.log?.("warn", "segment messages refused", {
      brand: auth.brandId,
      refused: rejected.length,
      rejected: rejected.slice(0, 20),
    });
    // Accepted already: a failure to keep the refusals is logged, never the request's answer.
    await recordRejectedMessages(
      deps.kv,
      { brandId: auth.brandId, door: `POST ${c.req.path}`, at: receivedAt, newId: deps.newId },
      rejected,
      messages,
    ).catch((err) =>
      deps.log?.("error", "segment refusals not kept", {
        brand: auth.brandId,
        refused: rejected.length,
        error: String(err),
      })
    );
    return c.json({ success: true as const, rejected }, 200);
  }
  return c.json({ success: true as const }, 200);
}

function _record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}
