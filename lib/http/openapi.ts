/**
 * OpenAPI plumbing of the pipeline: the router factory, the validation hook that answers in the
 * error envelope, and the shared response and parameter schemas.
 *
 * @module
 */
import { type Hook, OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "./app_env.ts";
import { HttpError } from "./errors.ts";

/** The error envelope every failure answers with. */
export const ErrorSchema = z.object({
  error: z.string().openapi({ example: "not_found" }),
  error_description: z.string().optional().openapi({ example: "Order not found" }),
}).openapi("Error");

const _DESCRIPTIONS: Record<number, string> = {
  400: "Malformed input",
  401: "Missing or invalid credential",
  403: "No scope, or not permitted",
  404: "Missing, or owned by another brand",
  405: "Method not allowed on this route",
  408: "Body not received within BODY_READ_TIMEOUT_MS",
  413: "Body too large",
  415: "Unsupported Content-Type",
  422: "The operator command failed",
  429: "Throttled; see Retry-After",
  502: "Upstream error",
  503:
    "Temporarily unavailable (the database, or a full ingest queue: queue_full); see Retry-After",
};

// One typical body per status, as the document's example of it.
const _EXAMPLES: Record<number, { error: string; error_description: string }> = {
  400: { error: "bad_request", error_description: "query.limit: Invalid input" },
  401: { error: "unauthorized", error_description: "Missing bearer credential" },
  403: { error: "forbidden", error_description: "The brand has no scope" },
  404: { error: "not_found", error_description: "Not found" },
  405: { error: "method_not_allowed", error_description: "Method not allowed" },
  408: { error: "request_timeout", error_description: "Request body not received in time" },
  413: { error: "payload_too_large", error_description: "Request body exceeds 1048576 bytes" },
  415: { error: "unsupported_media_type", error_description: "Unsupported Media Type" },
  422: { error: "command_failed", error_description: "the events are not valid JSON" },
  429: {
    error: "rate_limited",
    error_description: "Rate limit of 1200 requests per 60s exceeded; retry after 12s",
  },
  502: { error: "upstream_error", error_description: "The Shopify Admin API answered 500" },
  503: { error: "upstream_unavailable", error_description: "The database is unavailable; retry" },
};

/** OpenAPI response entries for the error statuses a route can answer. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries(statuses.map((status) => [status, {
    description: _DESCRIPTIONS[status] ?? "Error",
    content: {
      "application/json": {
        schema: ErrorSchema,
        example: _EXAMPLES[status] ?? { error: "internal_error" },
      },
    },
  }]));
}

/** A 409 `conflict` response entry, described as `description`. */
export function conflictResponse(description: string, example: string) {
  return {
    description,
    content: {
      "application/json": {
        schema: ErrorSchema,
        example: { error: "conflict", error_description: example },
      },
    },
  };
}

/** The security requirement of routes that take no credential (they check their own proof). */
export const noSecurity: { [name: string]: string[] }[] = [];

/** The security requirement of API-key routes. */
export const apiKeySecurity = [{ apiKey: [] }];

/** Turns zod failures into the contract's envelope: 400 `bad_request` naming each path. */
// deno-lint-ignore no-explicit-any
export const validationHook: Hook<any, AppEnv, any, any> = (result) => {
  if (result.success) return;
  const where = result.target === "json" ? "body" : result.target;
  const problems = result.error.issues.map((issue) => {
    const path = issue.path.length ? `${where}.${issue.path.join(".")}` : where;
    return `${path}: ${issue.message}`;
  });
  throw new HttpError(400, "bad_request", problems.join("; "));
};

/** A router whose validation failures go through the one error envelope. */
export function newRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
}

/**
 * An OpenAPI JSON response entry: `schema` under `application/json`, with a description and an
 * example of the body.
 */
export function jsonResponse<T extends z.ZodType>(
  schema: T,
  description: string,
  example: unknown,
) {
  return { description, content: { "application/json": { schema, example } } };
}

/** An OpenAPI JSON request body: `schema`, with an example. */
export function jsonBody<T extends z.ZodType>(
  schema: T,
  example: unknown,
  options: { required?: boolean; description?: string } = {},
) {
  return {
    required: options.required ?? true,
    ...(options.description ? { description: options.description } : {}),
    content: { "application/json": { schema, example } },
  };
}

/** The `{id}` path parameter of a resource route, described as `description`, at most `max` long. */
export function idParam(description = "The resource's id", max = 255, example = "1001") {
  return z.object({
    id: z.string().min(1).max(max).openapi({
      param: { name: "id", in: "path" },
      description,
      example,
    }),
  });
}
