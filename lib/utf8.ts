/**
 * Strict UTF-8 decoding of request bodies, shared by the HTTP pipeline and the ingest edge.
 *
 * @module
 */
import { DomainError } from "./errors.ts";

const _strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A body's text, decoded strictly: `invalid_input` when its bytes are not UTF-8 (a lenient
 * decoder would store U+FFFD in their place and still answer that the request was accepted).
 */
export function decodeUtf8Body(bytes: Uint8Array): string {
  try {
    return _strictUtf8.decode(bytes);
  } catch {
    throw new DomainError("invalid_input", "body is not valid UTF-8");
  }
}
