import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { databaseFailure } from "./db.ts";

/** The error codes of spec section 7, plus the few the foundation adds. */
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
  | "client_closed_request";

/** The one error type: carries the HTTP status, the contract's code, a description and headers. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
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

const CODE_BY_STATUS: Record<number, ErrorCode> = {
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
    // Validation should have refused the value first; this keeps a miss a client error.
    return new HttpError(
      400,
      "bad_request",
      `A value cannot be stored or compared: ${(err as Error).message}`,
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
    console.log(JSON.stringify({
      level: "info",
      message: "client disconnected",
      request_id: c.get("requestId"),
      method: c.req.method,
      path: c.req.path,
      error: String(httpError.cause ?? httpError.message),
    }));
    return c.json(
      { error: "client_closed_request", error_description: httpError.message },
      499 as 400,
    );
  }
  // A full ingest queue is load shed as designed, not a fault: logging each refusal would flood.
  if (httpError.status >= 500 && httpError.code !== "queue_full") {
    const cause = httpError.cause ?? httpError;
    console.error(JSON.stringify({
      level: "error",
      request_id: c.get("requestId"),
      method: c.req.method,
      path: c.req.path,
      status: httpError.status,
      error: cause instanceof Error ? (cause.stack ?? cause.message) : String(cause),
    }));
  }
  for (const [name, value] of Object.entries(httpError.headers)) c.header(name, value);
  return c.json(
    { error: httpError.code, error_description: httpError.message },
    httpError.status as 400,
  );
}

/** The root `notFound`: unknown routes get the JSON envelope too. */
export function onNotFound(c: Context): Response {
  return onError(new HttpError(404, "not_found", `No route for ${c.req.method} ${c.req.path}`), c);
}
