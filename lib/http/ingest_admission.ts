/**
 * Edge admission for async ingest: how many ingest requests one process works on at once, how
 * that number shrinks while the ingest queue's backlog is high, and how many may wait for a turn.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import { HttpError } from "./errors.ts";

/** Seconds a client refused by the admission bound waits before it retries. */
export const ADMISSION_RETRY_AFTER_SECONDS = 1;

/** The admission bound of one process. */
export interface IngestAdmissionOptions {
  /**
   * Ingest requests in progress at once while the backlog is at or under `softBacklog`; also
   * the most requests the process holds at all (in progress and waiting for a turn).
   */
  maxInFlight: number;
  /** Ingest requests in progress at once while the backlog is over `softBacklog`. */
  backloggedInFlight: number;
  /** Queued events past which the smaller bound applies. */
  softBacklog: number;
  /** The queue's backlog as this process sees it (cached; see `estimateBacklog`). */
  backlog: () => Promise<number>;
}

/** What {@linkcode ingestAdmission} returns: the middleware, and its counts for operators/tests. */
export interface IngestAdmission {
  middleware: MiddlewareHandler;
  /** Ingest requests in progress (admitted and not finished yet). */
  readonly inFlight: number;
  /** Ingest requests waiting for a turn. */
  readonly waiting: number;
  /** The requests in progress at once that apply now, given the backlog last seen. */
  readonly bound: number;
}

/**
 * Bounds the async ingest requests in progress in this process. The edge and the forwarder share
 * one event loop: every request in progress takes CPU (parsing, validation, its share of the
 * queue commit) that the forwarder then lacks, so an unbounded edge can accept faster than the
 * forwarder drains and starve it. While the backlog is over `softBacklog` only
 * `backloggedInFlight` requests are worked on at once and the others wait for a turn, in order of
 * arrival: the forwarder gets the CPU, and a request is delayed, not refused, as long as the
 * pipeline keeps up on the whole. Only past `maxInFlight` requests held (in progress and
 * waiting) is a request answered 503 `queue_full` with `Retry-After`, nothing of it accepted;
 * `INGEST_MAX_BACKLOG` refuses everything well before the backlog runs away. Sync ingest
 * (`?sync=true`) has its own throttle and is not counted. Put it before authentication, so a
 * refusal or a wait costs less than an admission.
 */
export function ingestAdmission(options: IngestAdmissionOptions): IngestAdmission {
  for (const name of ["maxInFlight", "backloggedInFlight"] as const) {
    const value = options[name];
    if (!Number.isSafeInteger(value) || value < 1) throw new Error(`bad ${name} ${value}`);
  }
  let inFlight = 0;
  let backlogged = false;
  const waiting: (() => void)[] = [];
  const bound = () => backlogged ? options.backloggedInFlight : options.maxInFlight;
  // Hands free turns to the waiting requests, oldest first; each counts as in progress at once.
  const pump = () => {
    while (waiting.length > 0 && inFlight < bound()) {
      inFlight++;
      waiting.shift()!();
    }
  };
  const middleware: MiddlewareHandler = async (c, next) => {
    if (c.req.method !== "POST" || c.req.query("sync") === "true") return await next();
    try {
      backlogged = (await options.backlog()) > options.softBacklog;
    } catch {
      // An unreadable queue keeps the last figure: the enqueue then answers 503
      // `service_unavailable`, which is the contract's answer for it.
    }
    pump();
    if (inFlight + waiting.length >= options.maxInFlight) {
      throw new HttpError(
        503,
        "queue_full",
        `the service holds ${inFlight + waiting.length} ingest requests (${inFlight} in ` +
          `progress, at most ${bound()} at once while the ingest queue is ` +
          `${backlogged ? "backlogged" : "flowing"}), at or over its bound of ` +
          `${options.maxInFlight}; no events were accepted, retry the batch after ` +
          `${ADMISSION_RETRY_AFTER_SECONDS}s`,
        { headers: { "Retry-After": String(ADMISSION_RETRY_AFTER_SECONDS) } },
      );
    }
    if (waiting.length === 0 && inFlight < bound()) inFlight++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      await next();
    } finally {
      inFlight--;
      pump();
    }
  };
  return {
    middleware,
    get inFlight() {
      return inFlight;
    },
    get waiting() {
      return waiting.length;
    },
    get bound() {
      return bound();
    },
  };
}
