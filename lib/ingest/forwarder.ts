/**
 * The forwarder: applies queued batches to the engine, waits out a database outage, and
 * dead-letters the events the engine refuses (docs/operations.md).
 *
 * @module
 */
import { log } from "../log.ts";
import type { Engine } from "../engine/engine.ts";
import { databaseFailure } from "../store/db.ts";
import {
  type EventsMessage,
  isEventsMessage,
  retireBacklogMessage,
  writeDeadLetter,
} from "./queue.ts";

/** What the forwarder needs: the queue's store, the engine and a clock. */
export interface ForwarderDeps {
  kv: Deno.Kv;
  engine: Engine;
  now: () => Date;
  /** Messages applied at once (default 4); the others wait under KV's renewed lease. */
  concurrency?: number;
  /**
   * When set, a wake-up message every `wakeMs`: Deno KV's SQLite backend wakes a listener only
   * for its own process's enqueues, so a forwarder in a process of its own would otherwise not
   * see the service's messages for minutes.
   */
  wakeMs?: number;
  /**
   * How long one delivery waits for an unreachable database before it fails (default one hour);
   * KV's own retries, and after them the dead letter, start only then.
   */
  outageWaitMs?: number;
  /** Handlers of other message kinds by kind (`shop_sync`), outside the slots; each idempotent. */
  jobs?: Record<string, (message: unknown) => Promise<void>>;
}

const _WAKE = { kind: "wake" } as const;

/**
 * The one handler of the KV queue, dispatching on the message kind. Delivery is at-least-once,
 * so every kind must be idempotent (the engine skips event ids it already stored).
 *
 * A thrown error is transient (the engine stored nothing): KV redelivers on the message's
 * backoff schedule and, when that runs out, writes the message to its dead-letter key. Events
 * the engine rejects permanently (4xx) are dead-lettered at once with the reason, not retried.
 * While the database cannot be reached at all, a delivery waits for it instead of failing, so an
 * outage does not use up the retries (an hour's outage would otherwise dead-letter everything).
 *
 * Deno KV hands a listener every ready message at once; applying them all together only adds
 * lock waits and, on a shared event loop, starves the HTTP edge, so at most `concurrency` apply
 * at a time.
 */
export function createQueueHandler(deps: ForwarderDeps): (message: unknown) => Promise<void> {
  const slots = _semaphore(deps.concurrency ?? 4);
  return async function handleQueueMessage(message) {
    if ((message as { kind?: unknown })?.kind === _WAKE.kind) return;
    const job = deps.jobs?.[String((message as { kind?: unknown })?.kind)];
    if (job) return await job(message);
    if (!isEventsMessage(message)) {
      log("error", "unknown queue message dropped");
      return;
    }
    const release = await slots.acquire();
    try {
      await _forwardWhenReachable(deps, message);
      // Applied or dead-lettered: out of the backlog. Should this throw, the redelivery applies
      // nothing twice and retires the message then.
      await retireBacklogMessage(deps.kv, message.id);
    } finally {
      release();
    }
  };
}

async function _forwardWhenReachable(deps: ForwarderDeps, message: EventsMessage) {
  const giveUpAt = Date.now() + (deps.outageWaitMs ?? 3_600_000);
  for (let attempt = 0;; attempt++) {
    try {
      return await _forwardEvents(deps, message);
    } catch (err) {
      if (databaseFailure(err) !== "unreachable" || Date.now() > giveUpAt) throw err;
      if (attempt % 12 === 0) {
        log("warn", "database unreachable; the forwarder waits for it", { error: String(err) });
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 5_000)));
    }
  }
}

async function _forwardEvents(deps: ForwarderDeps, message: EventsMessage): Promise<void> {
  const results = await deps.engine.applyEvents(message.batch);
  const failed = message.batch.events.flatMap((event, i) => {
    const result = results[i];
    return result && !result.ok ? [{ event, reason: `${result.status} ${result.error}` }] : [];
  });
  if (failed.length === 0) return;
  await writeDeadLetter(
    deps.kv,
    { ...message, batch: { ...message.batch, events: failed.map((f) => f.event) } },
    failed.map((f) => `${f.event.id}: ${f.reason}`).join("; ").slice(0, 2000),
    deps.now(),
  );
}

function _semaphore(size: number): { acquire(): Promise<() => void> } {
  let free = size;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  return {
    acquire() {
      if (free > 0) {
        free--;
        return Promise.resolve(release);
      }
      return new Promise((resolve) => waiting.push(() => resolve(release)));
    },
  };
}

/** Starts the queue consumer; the promise settles when the KV handle closes. */
export function startForwarder(deps: ForwarderDeps): Promise<void> {
  const listening = deps.kv.listenQueue(createQueueHandler(deps));
  if (deps.wakeMs === undefined) return listening;
  const timer = setInterval(() => {
    // A failed wake-up (the store closing) only delays delivery until the next one.
    deps.kv.enqueue(_WAKE).catch(() => {});
  }, deps.wakeMs);
  return listening.finally(() => clearInterval(timer));
}
