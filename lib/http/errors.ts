/**
 * The pipeline's errors: `HttpError`, the mapping of everything thrown (domain errors, database
 * failures, Hono's own exceptions) to the contract's status and code, and the one error body.
 *
 * @module
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode, UnofficialStatusCode } from "hono/utils/http-status";
import { log } from "../log.ts";
import { DomainError, type DomainErrorKind } from "../errors.ts";
import { databaseFailure } from "../store/db.ts";

/** The error codes of the API contract (see the OpenAPI document at `/docs`). */
export type ErrorCode =
  | "bad_request"
  | "batch_too_large"
  | "sync_batch_too_large"
  | "scope_binding"
  | "invalid_condition"
  | "unauthorized"
  | "forbidden"
  | "beta_not_enabled"
  | "integration_not_connected"
  | "not_found"
  | "conflict"
  | "method_not_allowed"
  | "payload_too_large"
  | "unsupported_media_type"
  | "rate_limited"
  | "sync_throttled"
  | "upstream_error"
  | "service_unavailable"
  | "upstream_unavailable"
  | "internal_error"
  | "request_timeout"
  | "queue_full"
  | "client_closed_request"
  // The operator API (/admin): a bad command line (the CLI's exit 2), a command that failed.
  | "usage_error"
  | "command_failed";

/** The one error type: carries the HTTP status, the contract's code, a description and headers. */
export class HttpError extends Error {
  readonly status: ContentfulStatusCode;
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;

  constructor(
    status: ContentfulStatusCode,
    code: ErrorCode,
    description: string,
    options: { headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(description, { cause: options.cause });
    this.name = "HttpError";
    this.status = status;
    this.code = code;
    this.headers = options.headers ?? {};
  }
}

const CODE_BY_STATUS: Partial<Record<ContentfulStatusCode, ErrorCode>> = {
  400: "bad_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  413: "payload_too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
  502: "upstream_error",
  503: "service_unavailable",
};

// The one place a domain error gets its status and the contract's code.
const _BY_KIND: Record<DomainErrorKind, [ContentfulStatusCode, ErrorCode]> = {
  invalid_input: [400, "bad_request"],
  invalid_condition: [400, "invalid_condition"],
  not_found: [404, "not_found"],
  conflict: [409, "conflict"],
  forbidden: [403, "forbidden"],
  throttled: [429, "rate_limited"],
  unavailable: [503, "upstream_unavailable"],
  upstream_failed: [502, "upstream_error"],
  unauthenticated: [401, "unauthorized"],
  scope_binding: [400, "scope_binding"],
  batch_too_large: [400, "batch_too_large"],
  sync_batch_too_large: [400, "sync_batch_too_large"],
  queue_full: [503, "queue_full"],
  service_unavailable: [503, "service_unavailable"],
  internal: [500, "internal_error"],
};

/** Maps anything thrown to an HttpError; unknown failures become an opaque 500. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  // Hono's own validators and helpers throw HTTPException (for example malformed JSON).
  if (err instanceof HTTPException) {
    const status = err.status;
    return new HttpError(status, CODE_BY_STATUS[status] ?? "internal_error", err.message, {
      cause: err,
    });
  }
  if (err instanceof DomainError) {
    const [status, code] = _BY_KIND[err.kind];
    const headers: Record<string, string> = err.retryAfterSeconds === undefined
      ? {}
      : { "Retry-After": String(err.retryAfterSeconds) };
    if (err.challenge !== undefined) headers["WWW-Authenticate"] = err.challenge;
    // The 5xx log line names what failed underneath (a KV or crypto error), not the wrapper.
    return new HttpError(status, code, err.message, { cause: err.cause ?? err, headers });
  }
  const failure = databaseFailure(err);
  if (failure === "timeout") {
    return new HttpError(
      503,
      "upstream_unavailable",
      "The query did not finish within its time budget; retry later or narrow the condition",
      { cause: err, headers: { "Retry-After": "1" } },
    );
  }
  if (failure === "unreachable" || failure === "lost") {
    return new HttpError(503, "upstream_unavailable", "The database is unavailable; retry", {
      cause: err,
      headers: { "Retry-After": "1" },
    });
  }
  if (failure === "data") {
    // Validation should have refused the value first; this keeps a miss a client error. The
    // database's own message names its internals (types, functions, the offending text): it
    // goes to the log (onError), never to the caller.
    return new HttpError(
      400,
      "bad_request",
      "A value cannot be stored or compared; check the request's values",
      { cause: err },
    );
  }
  return new HttpError(500, "internal_error", "Internal server error", { cause: err });
}

/** The root `onError`: the only place that writes an error body. Logs 5xx with the request id. */
export function onError(err: unknown, c: Context): Response {
  const httpError = toHttpError(err);
  // A client that went away mid-request (its body broke off: Deno.serve does not abort the
  // request's signal then) is no fault of the server's: one info line, no 500 and no stack.
  // Nobody reads the answer.
  if (httpError.code === "client_closed_request") {
    log("info", "client disconnected", {
      request_id: c.get("requestId"),
      method: c.req.method,
      path: c.req.path,
      error: String(httpError.cause ?? httpError.message),
    });
    // 499 is nginx's, not an official status.
    return c.json(
      { error: "client_closed_request", error_description: httpError.message },
      499 as UnofficialStatusCode,
    );
  }
  // A value the database refused is answered with a generic message: its own goes here.
  if (httpError.status < 500 && databaseFailure(httpError.cause) === "data") {
    const cause = httpError.cause as { code?: string; message?: string };
    log("warn", "database refused a value", {
      request_id: c.get("requestId"),
      method: c.req.method,
      path: c.req.path,
      status: httpError.status,
      sqlstate: cause.code,
      error: cause.message,
    });
  }
  // A full ingest queue is load shed as designed, not a fault: logging each refusal would flood.
  if (httpError.status >= 500 && httpError.code !== "queue_full") {
    const cause = httpError.cause ?? httpError;
    log("error", "request failed", {
      request_id: c.get("requestId"),
      method: c.req.method,
      path: c.req.path,
      status: httpError.status,
      error: cause instanceof Error ? (cause.stack ?? cause.message) : String(cause),
    });
  }
  for (const [name, value] of Object.entries(httpError.headers)) c.header(name, value);
  return c.json(
    { error: httpError.code, error_description: httpError.message },
    httpError.status,
  );
}

/** The root `notFound`: unknown routes get the JSON envelope too. */
export function onNotFound(c: Context): Response {
  return onError(new HttpError(404, "not_found", `No route for ${c.req.method} ${c.req.path}`), c);
}
