/**
 * Edge admission for async ingest: how many ingest requests one process works on at once, and
 * how that bound shrinks while the ingest queue's backlog is high.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { HttpError } from "./errors.ts";

/** Seconds a client refused by the admission bound waits before it retries. */
export const ADMISSION_RETRY_AFTER_SECONDS = 1;

/** The admission bound of one process. */
export interface IngestAdmissionOptions {
  /** Ingest requests in progress at once while the backlog is at or under `softBacklog`. */
  maxInFlight: number;
  /** Ingest requests in progress at once while the backlog is over `softBacklog`. */
  backloggedInFlight: number;
  /** Queued events past which the smaller bound applies. */
  softBacklog: number;
  /** The queue's backlog as this process sees it (cached; see `estimateBacklog`). */
  backlog: () => Promise<number>;
}

/** What {@linkcode ingestAdmission} returns: the middleware, and its count for operators/tests. */
export interface IngestAdmission {
  middleware: MiddlewareHandler;
  /** Ingest requests admitted and not finished yet. */
  readonly inFlight: number;
  /** The bound that applies now, given the backlog last seen. */
  readonly bound: number;
}

/**
 * Bounds the async ingest requests in progress in this process; past the bound a request is
 * answered 503 `queue_full` with `Retry-After` and nothing of it is accepted. The edge and the
 * forwarder share one event loop: every request in progress takes CPU (parsing, validation, its
 * share of the queue commit) that the forwarder then lacks, so an unbounded edge can accept
 * faster than the forwarder drains and starve it. While the backlog is over `softBacklog` the
 * bound drops to `backloggedInFlight`, which hands the CPU to the forwarder well before
 * `INGEST_MAX_BACKLOG` refuses everything. Sync ingest (`?sync=true`) has its own throttle and
 * is not counted. Put it before authentication, so a refusal costs less than an admission.
 */
export function ingestAdmission(options: IngestAdmissionOptions): IngestAdmission {
  for (const name of ["maxInFlight", "backloggedInFlight"] as const) {
    const value = options[name];
    if (!Number.isSafeInteger(value) || value < 1) throw new Error(`bad ${name} ${value}`);
  }
  let inFlight = 0;
  let backlogged = false;
  const bound = () => backlogged ? options.backloggedInFlight : options.maxInFlight;
  const middleware: MiddlewareHandler = async (c, next) => {
    if (c.req.method !== "POST" || c.req.query("sync") === "true") return await next();
    try {
      backlogged = (await options.backlog()) > options.softBacklog;
    } catch {
      // An unreadable queue keeps the last figure: the enqueue then answers 503
      // `service_unavailable`, which is the contract's answer for it.
    }
    if (inFlight >= bound()) {
      throw new HttpError(
        503,
        "queue_full",
        `the service is working on ${inFlight} ingest requests, at or over its bound of ` +
          `${bound()} while the ingest queue is ${backlogged ? "backlogged" : "flowing"}; no ` +
          `events were accepted, retry the batch after ${ADMISSION_RETRY_AFTER_SECONDS}s`,
        { headers: { "Retry-After": String(ADMISSION_RETRY_AFTER_SECONDS) } },
      );
    }
    inFlight++;
    try {
      await next();
    } finally {
      inFlight--;
    }
  };
  return {
    middleware,
    get inFlight() {
      return inFlight;
    },
    get bound() {
      return bound();
    },
  };
}
