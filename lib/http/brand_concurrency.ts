/**
 * One brand's share of the database pool for heavy reads: every read that evaluates the brand's
 * conditions (segment export and members, the query API, the dashboard's segment pages and
 * member counts, the customer record's segment list).
 *
 * @module
 */
/**
 * An in-process bound on one brand's heavy reads: each holds a database connection for as long as
 * its SQL runs, or, for an export, until its body is read, so one brand alone could otherwise take
 * the whole pool and stall every other brand's requests. Per process: each service process has its
 * own pool.
 */
import { HttpError } from "./errors.ts";

/** Gives a permit back; calling it again does nothing. */
export type Release = () => void;

/** At most `limit` holders per key at once; past it a request is refused, never queued. */
export class KeyedSemaphore {
  readonly limit: number;
  readonly #held = new Map<string, number>();

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`bad limit ${limit}`);
    this.limit = limit;
  }

  /** A permit for `key`, or null when `limit` are held. */
  tryAcquire(key: string): Release | null {
    const held = this.#held.get(key) ?? 0;
    if (held >= this.limit) return null;
    this.#held.set(key, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.#held.get(key)! - 1;
      // An idle key leaves no entry behind: the map holds only brands with reads running.
      if (left === 0) this.#held.delete(key);
      else this.#held.set(key, left);
    };
  }

  /** How many permits `key` holds now. */
  held(key: string): number {
    return this.#held.get(key) ?? 0;
  }

  /** How many keys hold a permit now. */
  get size(): number {
    return this.#held.size;
  }
}

/**
 * Heavy reads one brand may run at once over a pool of `poolMax` connections: half of it, so
 * the other half always serves other brands, ingest and light reads.
 */
export function heavyReadsPerBrand(poolMax: number): number {
  return Math.max(1, Math.floor(poolMax / 2));
}

/** The heavy-read bound of one app: {@linkcode BrandConcurrency.acquire} refuses past it. */
export interface BrandConcurrency {
  readonly limit: number;
  /** A permit for one heavy read of `brandId`; 429 `rate_limited` with Retry-After past the bound. */
  acquire(brandId: string): Release;
  /** A permit for one heavy read of `brandId`, or null past the bound (never waits). */
  tryAcquire(brandId: string): Release | null;
  /** How many permits `brandId` holds now. */
  held(brandId: string): number;
  /** Runs `fn` holding a permit of `brandId`. */
  run<T>(brandId: string, fn: () => Promise<T>): Promise<T>;
}

/** The bound for a pool of `poolMax` connections (see {@linkcode heavyReadsPerBrand}). */
export function createBrandConcurrency(poolMax: number): BrandConcurrency {
  const semaphore = new KeyedSemaphore(heavyReadsPerBrand(poolMax));
  const acquire = (brandId: string): Release => {
    const release = semaphore.tryAcquire(brandId);
    if (release) return release;
    // 429, not 503: the service is healthy, this caller is over its own share, and clients
    // already back off on 429 with Retry-After (as Segment's and Klaviyo's APIs answer a
    // per-account concurrency limit). A permit is held for a query budget at most, or while
    // an export body is read.
    throw new HttpError(
      429,
      "rate_limited",
      `at most ${semaphore.limit} heavy reads (export, members, query, segment counts) of one ` +
        "brand run at once; retry when one has finished",
      { headers: { "Retry-After": "1" } },
    );
  };
  return {
    limit: semaphore.limit,
    acquire,
    tryAcquire: (brandId) => semaphore.tryAcquire(brandId),
    held: (brandId) => semaphore.held(brandId),
    async run(brandId, fn) {
      const release = acquire(brandId);
      try {
        return await fn();
      } finally {
        release();
      }
    },
  };
}
