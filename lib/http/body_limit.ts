/**
 * Request body limits of the pipeline: size, read time and encoding (UTF-8), enforced before
 * anything parses a body. Declares the `body` context variable.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import type { UnofficialStatusCode } from "hono/utils/http-status";
import { HttpError } from "./errors.ts";
import { decodeUtf8Body } from "../utf8.ts";

/** How long a client may take to send a whole request body (BODY_READ_TIMEOUT_MS's default). */
export const DEFAULT_BODY_READ_TIMEOUT_MS = 30_000;

/** The context variable {@linkcode bufferBody} sets. */
export interface BodyVariables {
  /** The body `bufferBody` read within its limit (null: none), for a handler to parse. */
  body: Uint8Array | null;
}

/** A body's limits: its size, and the time a client has to send all of it. */
export interface BodyLimits {
  maxBytes: number;
  /** Default {@linkcode DEFAULT_BODY_READ_TIMEOUT_MS}. */
  timeoutMs?: number;
}

/**
 * Rejects a request body past `maxBytes` with 413 before anything parses it. A declared
 * Content-Length over the limit is refused without reading; otherwise the stream is counted as
 * it arrives (chunked bodies, or a Content-Length that lies) and cut off at the limit. A body
 * not whole within `timeoutMs` is 408 `request_timeout`. A body that is not UTF-8 is 400
 * `bad_request` unless its Content-Type declares it binary (`application/octet-stream`,
 * `multipart/*`): decoding would otherwise replace the bad bytes silently.
 */
export function bodyLimit(options: BodyLimits): MiddlewareHandler {
  return async function bodyLimitMiddleware(c, next) {
    const bytes = await readBodyWithin(c.req.raw, options.maxBytes, options.timeoutMs);
    if (bytes) {
      if (!_declaredBinary(c.req.raw.headers.get("content-type"))) decodeUtf8Body(bytes);
      // Rebuilt from its parts: cloning the request would also copy (and so read) its signal.
      const { method, headers, url } = c.req.raw;
      c.req.raw = new Request(url, { method, headers, body: bytes });
    }
    await next();
  };
}

/**
 * {@linkcode bodyLimit} for a handler that parses the bytes itself: they are left in
 * `c.var.body` instead of in a rebuilt request, which is costly on the ingest path.
 */
export function bufferBody(options: BodyLimits): MiddlewareHandler<{ Variables: BodyVariables }> {
  return async function bufferBodyMiddleware(c, next) {
    c.set("body", await readBodyWithin(c.req.raw, options.maxBytes, options.timeoutMs));
    await next();
  };
}

// Media types whose bodies are bytes, not text: the operator API's FILE bodies, form uploads.
function _declaredBinary(contentType: string | null): boolean {
  const type = (contentType ?? "").trim().toLowerCase();
  return type.startsWith("application/octet-stream") || type.startsWith("multipart/");
}

/**
 * A request's body read whole, or 413 `payload_too_large` past `maxBytes` (as
 * {@linkcode bodyLimit} decides it); null when the request has none. The whole body must arrive
 * within `timeoutMs` (408 `request_timeout`, the read cancelled); a body that breaks off (the
 * client closed the connection) is 499 `client_closed_request`, which `onError` logs as such.
 */
export async function readBodyWithin(
  request: Request,
  maxBytes: number,
  timeoutMs: number = DEFAULT_BODY_READ_TIMEOUT_MS,
): Promise<Uint8Array<ArrayBuffer> | null> {
  const tooLarge = () =>
    new HttpError(413, "payload_too_large", `Request body exceeds ${maxBytes} bytes`);
  const body = request.body;
  if (!body) return null;
  const declared = Number(request.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await body.cancel().catch(() => {});
    throw tooLarge();
  }
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let size = 0;
  const reader = body.getReader();
  // One deadline for the whole body: a client trickling a byte at a time must not reset it.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), timeoutMs);
  });
  try {
    while (true) {
      let next: ReadableStreamReadResult<Uint8Array> | null;
      try {
        next = await Promise.race([reader.read(), expired]);
      } catch (err) {
        // 499 is nginx's "client closed request", not an official status.
        throw new HttpError(
          499 as UnofficialStatusCode,
          "client_closed_request",
          "the request body broke off before it was complete",
          { cause: err },
        );
      }
      if (next === null) {
        // Cancelling ends the pending read, so nothing waits on the client any longer.
        reader.cancel().catch(() => {});
        throw new HttpError(
          408,
          "request_timeout",
          `the request body was not received within ${timeoutMs} ms`,
          { headers: { Connection: "close" } },
        );
      }
      if (next.done) break;
      size += next.value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(next.value as Uint8Array<ArrayBuffer>);
    }
  } finally {
    clearTimeout(timer);
  }
  if (chunks.length === 1) return chunks[0]!;
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}
