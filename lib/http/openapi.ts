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
  429: "Throttled; see Retry-After",
  502: "Upstream error",
  503:
    "Temporarily unavailable (the database, or a full ingest queue: queue_full); see Retry-After",
};

/** OpenAPI response entries for the error statuses a route can answer. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries(statuses.map((status) => [status, {
    description: _DESCRIPTIONS[status] ?? "Error",
    content: { "application/json": { schema: ErrorSchema } },
  }]));
}

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

/** An OpenAPI JSON response entry: `schema` under `application/json`, with a description. */
export function jsonResponse<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { "application/json": { schema } } };
}

/** The `{id}` path parameter of a resource route, described as `description`, at most `max` long. */
export function idParam(description = "The resource's id", max = 255) {
  return z.object({
    id: z.string().min(1).max(max).openapi({ param: { name: "id", in: "path" }, description }),
  });
}
