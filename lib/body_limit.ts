import type { MiddlewareHandler } from "hono";
import { HttpError } from "./errors.ts";

/**
 * Rejects a request body past `maxBytes` with 413 before anything parses it. A declared
 * Content-Length over the limit is refused without reading; otherwise the stream is counted as
 * it arrives (chunked bodies, or a Content-Length that lies) and cut off at the limit.
 */
export function bodyLimit(options: { maxBytes: number }): MiddlewareHandler {
  const tooLarge = () =>
    new HttpError(413, "payload_too_large", `Request body exceeds ${options.maxBytes} bytes`);
  return async function bodyLimitMiddleware(c, next) {
    const body = c.req.raw.body;
    if (!body) return await next();
    const declared = Number(c.req.header("content-length"));
    if (Number.isFinite(declared) && declared > options.maxBytes) {
      await body.cancel().catch(() => {});
      throw tooLarge();
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    const reader = body.getReader();
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > options.maxBytes) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
    const bytes = new Uint8Array(size);
    let offset = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, offset);
      offset += chunk.byteLength;
    }
    // Rebuilt from its parts: cloning the request would also copy (and so read) its signal.
    const { method, headers, url } = c.req.raw;
    c.req.raw = new Request(url, { method, headers, body: bytes });
    await next();
  };
}
