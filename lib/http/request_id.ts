/**
 * Request ids: every request gets one of the server's own, which keys its usage record and its
 * log lines and is answered in `X-Request-Id`. A caller's `X-Request-Id` is kept apart as
 * `clientRequestId`: trusting it as the id would let three requests share one usage record, or a
 * caller choose the id another request is logged under. Declares the `requestId` and
 * `clientRequestId` context variables.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";

/** The context variables {@linkcode requestIds} sets. */
export interface RequestIdVariables {
  /** The server's id of this request: unique, never the caller's. */
  requestId: string;
  /** The caller's `X-Request-Id` when it is a safe token (up to 255 of `A-Za-z0-9_-=`). */
  clientRequestId: string | null;
}

const _HEADER = "X-Request-Id";
const _SAFE_CLIENT_ID = /^[\w\-=]{1,255}$/;

/** The caller's `X-Request-Id` if it is short and safe enough to log, else null. */
export function clientRequestIdOf(header: string | undefined): string | null {
  return header !== undefined && _SAFE_CLIENT_ID.test(header) ? header : null;
}

/** Middleware: sets a fresh `requestId` from `newId` and the caller's `clientRequestId`. */
export function requestIds(newId: () => string): MiddlewareHandler<{
  Variables: RequestIdVariables;
}> {
  return async function requestIdMiddleware(c, next) {
    const id = newId();
    c.set("requestId", id);
    c.set("clientRequestId", clientRequestIdOf(c.req.header(_HEADER)));
    c.header(_HEADER, id);
    await next();
  };
}
