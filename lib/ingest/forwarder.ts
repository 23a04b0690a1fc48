/**
 * The forwarder: applies queued batches to the engine, waits out a database outage, and
 * dead-letters the events the engine refuses (docs/operations.md).
 *
 * @module
 */
import { log } from "../log.ts";
import type { ApplyResult, Engine, EventBatch } from "../engine/engine.ts";
import { databaseFailure } from "../store/db.ts";
import { type EventsMessage, type IngestQueue, isEventsMessage, writeDeadLetter } from "./queue.ts";

/** What the forwarder needs: the ingest queue, the engine and a clock. */
export interface ForwarderDeps {
  queue: IngestQueue;
  engine: Engine;
  now: () => Date;
  /**
   * Transactions (a message, or a group of them) applied at once (default 4); the other messages
   * wait under KV's renewed lease.
   */
  concurrency?: number;
  /** Passed to {@linkcode IngestQueue.consume}: a forwarder in a process of its own sets it. */
  wakeMs?: number;
  /**
   * How long one delivery waits for an unreachable database before it fails (default one hour);
   * KV's own retries, and after them the dead letter, start only then.
   */
  outageWaitMs?: number;
  /** Handlers of other message kinds by kind (`shop_sync`), outside the slots; each idempotent. */
  jobs?: Record<string, (message: unknown) => Promise<void>>;
  /**
   * Called after each applied message or group, before its delivery completes (so a redelivery
   * calls it again), with the scope and the profile ids its events named: segment membership
   * (lib/audiences). Its failure is logged and never fails the delivery.
   */
  afterApply?: (applied: { scope: string; profileIds: string[] }) => Promise<void>;
}

/** At most this many messages, and this many events, apply in one group's transaction. */
const _GROUP_MESSAGES = 16;
const _GROUP_EVENTS = 1_000;

/**
 * The one handler of the ingest queue, dispatching on the message kind. Delivery is at-least-once,
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
 * at a time. When the engine can apply a group, the messages waiting for a turn go together: the
 * next turn takes those of the first one's scope and source, up to a bound, into one transaction
 * (one statement per table for all of them). A backlog is then drained in fewer, larger
 * transactions, and a lone message still starts at once.
 */
export function createQueueHandler(deps: ForwarderDeps): (message: unknown) => Promise<void> {
  const forward = deps.engine.applyEventGroup
    ? _groupingForwarder(deps, deps.engine.applyEventGroup.bind(deps.engine))
    : _singleForwarder(deps);
  return async function handleQueueMessage(message) {
    const job = deps.jobs?.[String((message as { kind?: unknown })?.kind)];
    if (job) return await job(message);
    if (!isEventsMessage(message)) {
      log("error", "unknown queue message dropped");
      return;
    }
    await forward(message);
  };
}

/** Applies each message in a transaction of its own, `concurrency` at a time. */
function _singleForwarder(deps: ForwarderDeps): (message: EventsMessage) => Promise<void> {
  const slots = _semaphore(deps.concurrency ?? 4);
  return async (message) => {
    const release = await slots.acquire();
    try {
      await _forwardOne(deps, message);
    } finally {
      release();
    }
  };
}

interface _Waiting {
  message: EventsMessage;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** Applies the waiting messages in groups, `concurrency` groups at a time. */
function _groupingForwarder(
  deps: ForwarderDeps,
  applyGroup: (batches: EventBatch[]) => Promise<ApplyResult[][]>,
): (message: EventsMessage) => Promise<void> {
  const limit = deps.concurrency ?? 4;
  const waiting: _Waiting[] = [];
  let running = 0;
  const pump = () => {
    while (running < limit && waiting.length > 0) {
      running++;
      _forwardGroup(deps, applyGroup, _takeGroup(waiting)).finally(() => {
        running--;
        pump();
      });
    }
  };
  return (message) =>
    new Promise<void>((resolve, reject) => {
      waiting.push({ message, resolve, reject });
      pump();
    });
}

/** Takes the first waiting message and the next ones of its scope and source, up to the bounds. */
function _takeGroup(waiting: _Waiting[]): _Waiting[] {
  const group = [waiting.shift()!];
  const { scope, source } = group[0]!.message.batch;
  let events = group[0]!.message.batch.events.length;
  for (let i = 0; i < waiting.length && group.length < _GROUP_MESSAGES;) {
    const batch = waiting[i]!.message.batch;
    if (
      batch.scope === scope && batch.source === source &&
      events + batch.events.length <= _GROUP_EVENTS
    ) {
      group.push(...waiting.splice(i, 1));
      events += batch.events.length;
    } else {
      i++;
    }
  }
  return group;
}

/**
 * Applies a group in one transaction and settles each message's delivery. Should the group fail
 * for any reason but an unreachable database, its messages are applied one by one, so that one
 * message's fault fails only that message.
 */
async function _forwardGroup(
  deps: ForwarderDeps,
  applyGroup: (batches: EventBatch[]) => Promise<ApplyResult[][]>,
  group: _Waiting[],
): Promise<void> {
  if (group.length > 1) {
    try {
      const results = await _whenReachable(
        deps,
        () => applyGroup(group.map((w) => w.message.batch)),
      );
      for (const [i, w] of group.entries()) await _deadLetterRefused(deps, w.message, results[i]!);
      await _afterApply(deps, group.map((w) => w.message.batch));
      await deps.queue.retire(group.map((w) => w.message.id));
      for (const w of group) w.resolve();
      return;
    } catch (err) {
      if (databaseFailure(err) === "unreachable") {
        for (const w of group) w.reject(err);
        return;
      }
    }
  }
  for (const w of group) {
    try {
      await _forwardOne(deps, w.message);
      w.resolve();
    } catch (err) {
      w.reject(err);
    }
  }
}

/** Applies one message, dead-letters what the engine refused, and retires it from the backlog. */
async function _forwardOne(deps: ForwarderDeps, message: EventsMessage): Promise<void> {
  const results = await _whenReachable(deps, () => deps.engine.applyEvents(message.batch));
  await _deadLetterRefused(deps, message, results);
  await _afterApply(deps, [message.batch]);
  // Applied or dead-lettered: out of the backlog. Should this throw, the redelivery applies
  // nothing twice and retires the message then.
  await deps.queue.retire([message.id]);
}

/** Runs the `afterApply` hook for batches of one scope; a failure is logged, never thrown. */
async function _afterApply(deps: ForwarderDeps, batches: EventBatch[]): Promise<void> {
  if (!deps.afterApply) return;
  const scope = batches[0]!.scope;
  const profileIds = [...new Set(batches.flatMap((b) => b.events.map((e) => e.profileId)))];
  try {
    await deps.afterApply({ scope, profileIds });
  } catch (err) {
    log("error", "after-apply hook failed", { scope, error: String(err) });
  }
}

async function _whenReachable<T>(deps: ForwarderDeps, apply: () => Promise<T>): Promise<T> {
  const giveUpAt = Date.now() + (deps.outageWaitMs ?? 3_600_000);
  for (let attempt = 0;; attempt++) {
    try {
      return await apply();
    } catch (err) {
      if (databaseFailure(err) !== "unreachable" || Date.now() > giveUpAt) throw err;
      if (attempt % 12 === 0) {
        log("warn", "database unreachable; the forwarder waits for it", { error: String(err) });
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 5_000)));
    }
  }
}

async function _deadLetterRefused(
  deps: ForwarderDeps,
  message: EventsMessage,
  results: ApplyResult[],
): Promise<void> {
  const failed = message.batch.events.flatMap((event, i) => {
    const result = results[i];
    return result && !result.ok ? [{ event, reason: `${result.status} ${result.error}` }] : [];
  });
  if (failed.length === 0) return;
  await writeDeadLetter(
    deps.queue.kv,
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

/** Starts the queue consumer; the promise settles when the queue stops or its KV closes. */
export function startForwarder(deps: ForwarderDeps): Promise<void> {
  return deps.queue.consume(createQueueHandler(deps), { wakeMs: deps.wakeMs });
}
