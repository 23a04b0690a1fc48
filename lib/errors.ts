/**
 * Domain errors: what lib/ throws when it refuses a request or cannot serve it. lib/ knows no
 * HTTP; `toHttpError` (lib/http/errors.ts) maps each kind to the contract's status and code in
 * one place. Also the start-up failure of a store, which entry points report (start_failure.ts).
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
  | "upstream_failed"
  /** No valid credential; `challenge` says what to present (401 `unauthorized`). */
  | "unauthenticated"
  /** A batch names its own scope while the credential binds it (400 `scope_binding`). */
  | "scope_binding"
  /** More events than a batch may hold (400 `batch_too_large`). */
  | "batch_too_large"
  /** More events than a synchronous batch may hold (400 `sync_batch_too_large`). */
  | "sync_batch_too_large"
  /** The ingest backlog is at its bound; retry after `retryAfterSeconds` (503 `queue_full`). */
  | "queue_full"
  /** Not configured, or its own ingest queue down; retry (503 `service_unavailable`). */
  | "service_unavailable"
  /** An operator-side fault with a description worth showing (500 `internal_error`). */
  | "internal";

/** An error of the domain, with its kind; the message is safe to show the caller. */
export class DomainError extends Error {
  readonly kind: DomainErrorKind;
  readonly retryAfterSeconds: number | undefined;
  /** For `unauthenticated`: the scheme and parameters of the credential to present. */
  readonly challenge: string | undefined;

  constructor(
    kind: DomainErrorKind,
    message: string,
    options: { cause?: unknown; retryAfterSeconds?: number; challenge?: string } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "DomainError";
    this.kind = kind;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.challenge = options.challenge;
  }
}

/** A store that could not be opened, with the variable that chose it (for the start-up log). */
export class StoreOpenError extends Error {
  /** The store at fault: `database`, `kv` or `migrations`. */
  readonly store: "database" | "kv" | "migrations";
  /** The environment variable to look at. */
  readonly variable: string;

  constructor(
    store: "database" | "kv" | "migrations",
    variable: string,
    message: string,
    options: { cause: unknown },
  ) {
    super(message, options);
    this.name = "StoreOpenError";
    this.store = store;
    this.variable = variable;
  }
}
