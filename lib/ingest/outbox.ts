/**
 * The ingest outbox (`INGEST_QUEUE=outbox`): the ingest queue (lib/ingest/queue.ts) made of plain
 * KV entries, for a KV database that does not deliver queue messages (the platform's default
 * database on Deno Deploy, whose documentation no longer offers queues). A message is an outbox
 * entry written in the same commit as the rest of its batch, and {@linkcode IngestQueue.consume}
 * drains the entries with the guarantees of Deno KV's queue: at-least-once delivery under a
 * renewed lease, retries on the message's `backoffSchedule`, and `keysIfUndelivered` written when
 * they run out. See docs/operations.md.
 *
 * @module
 */
import { log } from "../log.ts";
import { ingestOutboxKey, ingestOutboxPrefix } from "../store/kv_keys.ts";
import {
  type IngestQueue,
  type IngestQueueOptions,
  KvBackedQueue,
  type SendOptions,
} from "./queue.ts";

/** How eagerly the outbox drains, and its clock. */
export interface OutboxOptions {
  now?: () => number;
  /** Messages delivered at once by one listener (default 4). */
  concurrency?: number;
  /** First wait after a pass that found nothing ready; doubled up to `maxIdleMs` (default 250). */
  pollMs?: number;
  /** Longest wait between passes while idle (default 2000). */
  maxIdleMs?: number;
  /** How long a claimed message is held before another listener may take it (default 30 s). */
  leaseMs?: number;
}

interface _Entry {
  message: unknown;
  /** Deliveries that failed so far. */
  failures: number;
  /** Not delivered before this (epoch ms): the enqueue's delay or a retry's backoff. */
  notBefore: number;
  /** Held by a listener until then (epoch ms); 0 when free. */
  leaseUntil: number;
  keysIfUndelivered: Deno.KvKey[];
  backoffSchedule: number[];
}

// Deno KV's own schedule when an enqueue gives none.
const _DEFAULT_BACKOFF_MS = [1_000, 5_000, 10_000];
// Entries one pass reads; leased or delayed entries ahead of ready ones count against it.
const _LIST_LIMIT = 500;

/** The ingest queue as an outbox of KV entries (see the module documentation). */
export function createOutboxQueue(
  kv: Deno.Kv,
  options: IngestQueueOptions & OutboxOptions,
): IngestQueue {
  return new _OutboxQueue(kv, options);
}

class _OutboxQueue extends KvBackedQueue {
  readonly kind = "outbox" as const;
  readonly #now: () => number;
  readonly #drainer: _Drainer;

  constructor(kv: Deno.Kv, options: IngestQueueOptions & OutboxOptions) {
    super(kv, options);
    this.#now = options.now ?? Date.now;
    this.#drainer = new _Drainer(kv, options, this.#now);
  }

  protected write(op: Deno.AtomicOperation, message: unknown, options: SendOptions): void {
    // Ids are time-ordered (ULIDs), so that entries drain oldest first.
    op.set(
      ingestOutboxKey(this.newId()),
      {
        message,
        failures: 0,
        notBefore: this.#now() + (options.delay ?? 0),
        leaseUntil: 0,
        keysIfUndelivered: options.keysIfUndelivered ?? [],
        backoffSchedule: options.backoffSchedule ?? _DEFAULT_BACKOFF_MS,
      } satisfies _Entry,
    );
  }

  protected written(): void {
    this.#drainer.wake();
  }

  consume(handler: (message: unknown) => Promise<void> | void): Promise<void> {
    // Polled: no wake-up messages are needed for another process's entries.
    return this.#drainer.run(handler);
  }

  drained(): Promise<void> {
    return this.#drainer.drained();
  }

  stop(): void {
    this.#drainer.stop();
  }
}

class _Drainer {
  #kv: Deno.Kv;
  #now: () => number;
  #concurrency: number;
  #pollMs: number;
  #maxIdleMs: number;
  #leaseMs: number;
  #running = new Set<Promise<void>>();
  #stopped = false;
  #listening = false;
  #wakeUp: (() => void) | null = null;
  #idleWaiters: (() => void)[] = [];

  constructor(kv: Deno.Kv, options: OutboxOptions, now: () => number) {
    this.#kv = kv;
    this.#now = now;
    this.#concurrency = options.concurrency ?? 4;
    this.#pollMs = options.pollMs ?? 250;
    this.#maxIdleMs = options.maxIdleMs ?? 2_000;
    this.#leaseMs = options.leaseMs ?? 30_000;
  }

  /** Ends the current wait: an entry was just written, or a delivery finished. */
  wake(): void {
    this.#wakeUp?.();
  }

  stop(): void {
    this.#stopped = true;
    this.wake();
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  drained(): Promise<void> {
    if (!this.#listening || this.#stopped) return Promise.resolve();
    const idle = new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
    this.wake();
    return idle;
  }

  /** Delivers ready entries to `handler` until {@linkcode _Drainer.stop}; settles then. */
  async run(handler: (message: unknown) => Promise<void> | void): Promise<void> {
    this.#listening = true;
    let idleMs = this.#pollMs;
    while (!this.#stopped) {
      let wait: number;
      if (this.#running.size >= this.#concurrency) {
        wait = this.#maxIdleMs;
      } else {
        let pass: { claimed: number; nextReadyAt: number };
        try {
          pass = await this.#claimReady(handler);
        } catch (err) {
          if (this.#stopped) break;
          log("error", "ingest outbox unreadable; retrying", { error: String(err) });
          pass = { claimed: 0, nextReadyAt: Infinity };
        }
        if (pass.claimed > 0) {
          idleMs = this.#pollMs;
          continue;
        }
        if (this.#running.size === 0) {
          for (const resolve of this.#idleWaiters.splice(0)) resolve();
        }
        wait = Math.max(0, Math.min(idleMs, pass.nextReadyAt - this.#now()));
        idleMs = Math.min(idleMs * 2, this.#maxIdleMs);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.#wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wakeUp = null;
    }
    // As closing KV ends listenQueue: a delivery still running is not awaited; its entry stays
    // leased and is delivered again once the lease ends.
  }

  async #claimReady(
    handler: (message: unknown) => Promise<void> | void,
  ): Promise<{ claimed: number; nextReadyAt: number }> {
    let claimed = 0;
    let nextReadyAt = Infinity;
    const now = this.#now();
    const entries = this.#kv.list<_Entry>({ prefix: ingestOutboxPrefix() }, {
      limit: _LIST_LIMIT,
    });
    for await (const entry of entries) {
      if (this.#running.size >= this.#concurrency || this.#stopped) break;
      const readyAt = Math.max(entry.value.notBefore, entry.value.leaseUntil);
      if (readyAt > now) {
        nextReadyAt = Math.min(nextReadyAt, readyAt);
        continue;
      }
      const leased = { ...entry.value, leaseUntil: now + this.#leaseMs };
      const result = await this.#kv.atomic().check(entry).set(entry.key, leased).commit();
      // Refused: another listener claimed it first.
      if (!result.ok) continue;
      claimed++;
      const delivery = this.#deliver(handler, {
        key: entry.key,
        value: leased,
        versionstamp: result.versionstamp,
      }).finally(() => {
        this.#running.delete(delivery);
        this.wake();
      });
      this.#running.add(delivery);
    }
    return { claimed, nextReadyAt };
  }

  async #deliver(
    handler: (message: unknown) => Promise<void> | void,
    claimed: Deno.KvEntry<_Entry>,
  ): Promise<void> {
    let current = claimed;
    let renewing = Promise.resolve();
    // A delivery may wait long (the forwarder waits out a database outage): keep the lease.
    const renewal = setInterval(() => {
      // A stopped listener is a closing process: its leases lapse, as a dead process's would.
      if (this.#stopped) return clearInterval(renewal);
      renewing = renewing.then(async () => {
        const renewed = { ...current.value, leaseUntil: this.#now() + this.#leaseMs };
        const result = await this.#kv.atomic().check(current).set(current.key, renewed).commit();
        if (result.ok) current = { ...current, value: renewed, versionstamp: result.versionstamp };
      }).catch(() => {});
    }, this.#leaseMs / 3);
    let failure: unknown = null;
    try {
      await handler(claimed.value.message);
    } catch (err) {
      failure = err;
    }
    clearInterval(renewal);
    await renewing;
    const entry = current.value;
    const op = this.#kv.atomic().check(current);
    if (failure === null) {
      op.delete(current.key);
    } else if (entry.failures >= entry.backoffSchedule.length) {
      for (const key of entry.keysIfUndelivered) op.set(key, entry.message);
      op.delete(current.key);
      log("error", "outbox message undelivered after its retries", { error: String(failure) });
    } else {
      op.set(current.key, {
        ...entry,
        failures: entry.failures + 1,
        notBefore: this.#now() + entry.backoffSchedule[entry.failures]!,
        leaseUntil: 0,
      });
    }
    // Refused or failed (the lease lost, the store closing): the entry stays and is delivered
    // again once its lease ends, as a queue redelivers an unacknowledged message.
    await op.commit().catch(() => {});
  }
}
