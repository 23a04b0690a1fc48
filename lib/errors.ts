/**
 * Domain errors: what lib/ throws when it refuses a request or cannot serve it. lib/ knows no
 * HTTP; `toHttpError` (lib/http/errors.ts) maps each kind to the contract's status and code in
 * one place.
 *
 * @module
 */

/** Why the domain refused or failed. */
export type DomainErrorKind =
  /** Malformed or out-of-range input (400 `bad_request`). */
  | "invalid_input"
  /** A condition outside the public vocabulary or limits (400 `invalid_condition`). */
  | "invalid_condition"
  /** Missing, or another brand's: the same to the caller (404 `not_found`). */
  | "not_found"
  /** The resource exists already, or is in a state that refuses the change (409 `conflict`). */
  | "conflict"
  /** The caller may not do this (403 `forbidden`). */
  | "forbidden"
  /** Over a per-caller bound; retry after `retryAfterSeconds` (429 `rate_limited`). */
  | "throttled"
  /** A dependency is down or out of time; retry (503 `upstream_unavailable`). */
  | "unavailable"
  /** A dependency answered with a failure (502 `upstream_error`). */
  | "upstream_failed";

/** An error of the domain, with its kind; the message is safe to show the caller. */
export class DomainError extends Error {
  readonly kind: DomainErrorKind;
  readonly retryAfterSeconds: number | undefined;

  constructor(
    kind: DomainErrorKind,
    message: string,
    options: { cause?: unknown; retryAfterSeconds?: number } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "DomainError";
    this.kind = kind;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}
