/**
 * The forwarder: applies queued batches to the engine, waits out a database outage, and
 * dead-letters the events the engine refuses (docs/operations.md).
 *
 * @module
 */
import { log } from "../log.ts";
import type { ApplyResult, Engine } from "../engine/engine.ts";
import { createBatcher } from "../store/batcher.ts";
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
   * Called after a group of events messages committed (and left the backlog), with its scope and
   * the ids of the profiles its applied events name (as sent: an id merged away stands for the
   * profile that absorbed it). At least once per applied event: a redelivery calls it again. Its
   * failure fails the delivery (an unreachable database is waited out first), so the redelivery
   * calls it again: it must be idempotent. `pending`: the events messages this forwarder holds
   * besides the group's (waiting for a turn or being applied), so the hook knows more follows.
   */
  afterApply?: (applied: { scope: string; profileIds: string[]; pending: number }) => Promise<void>;
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
 * lock waits and, on a shared event loop, starves the HTTP edge, so at most `concurrency`
 * transactions apply at a time. Events messages go through the batching layer
 * (lib/store/batcher.ts): when the engine can apply a group, the messages waiting for a turn go
 * together, those of the first one's scope and source up to a bound, into one transaction (one
 * statement per table for all of them), so a backlog drains in fewer, larger transactions and a
 * lone message still starts at once. A group that fails for any reason but an unreachable
 * database comes back message by message through the same path (the layer's one failure path),
 * so one message's fault fails only that message.
 */
export function createQueueHandler(deps: ForwarderDeps): (message: unknown) => Promise<void> {
  const grouped = deps.engine.applyEventGroup !== undefined;
  // Events messages handed to this handler and not yet settled: what the hook is told follows.
  let held = 0;
  const forward = createBatcher<EventsMessage>({
    maxItems: grouped ? _GROUP_MESSAGES : 1,
    maxWeight: _GROUP_EVENTS,
    weight: (message) => message.batch.events.length,
    key: (message) => JSON.stringify([message.batch.scope, message.batch.source]),
    concurrency: deps.concurrency ?? 4,
    isolates: (err) => databaseFailure(err) !== "unreachable",
    commit: (group) => _forwardGroup(deps, group, () => held - group.length),
  });
  return async function handleQueueMessage(message) {
    const job = deps.jobs?.[String((message as { kind?: unknown })?.kind)];
    if (job) return await job(message);
    if (!isEventsMessage(message)) {
      log("error", "unknown queue message dropped");
      return;
    }
    held++;
    try {
      await forward(message);
    } finally {
      held--;
    }
  };
}

/**
 * Applies a group of messages of one scope and source in one transaction (a lone message through
 * `applyEvents`), dead-letters what the engine refused, tells `afterApply`, and retires the
 * group from the backlog. Throws when nothing was applied; a retry applies nothing twice.
 */
async function _forwardGroup(
  deps: ForwarderDeps,
  group: EventsMessage[],
  pending: () => number,
): Promise<void> {
  const { engine } = deps;
  const results = await _whenReachable(
    deps,
    async () =>
      group.length === 1
        ? [await engine.applyEvents(group[0]!.batch)]
        : await engine.applyEventGroup!(group.map((message) => message.batch)),
  );
  for (const [i, message] of group.entries()) await _deadLetterRefused(deps, message, results[i]!);
  // The hook before the retirement: a group leaves the backlog once what it maintains is under
  // way too, so an empty backlog means every hook has run.
  if (deps.afterApply) await _afterApply(deps, deps.afterApply, group, results, pending);
  // Applied or dead-lettered: out of the backlog. Should this throw, the redelivery applies
  // nothing twice and retires the messages then.
  await deps.queue.retire(group.map((message) => message.id));
}

/**
 * Calls the hook with the profiles the group's applied events name. It waits out an unreachable
 * database as the apply does; any other failure fails the delivery, so the queue redelivers it:
 * the engine applies nothing twice and the hook runs again (it must be idempotent), so what the
 * hook maintains is never left behind by the events.
 */
async function _afterApply(
  deps: ForwarderDeps,
  hook: NonNullable<ForwarderDeps["afterApply"]>,
  group: EventsMessage[],
  results: ApplyResult[][],
  pending: () => number,
): Promise<void> {
  const profileIds = new Set<string>();
  group.forEach((message, m) =>
    message.batch.events.forEach((event, i) => {
      if (results[m]![i]?.ok) profileIds.add(event.profileId);
    })
  );
  if (profileIds.size === 0) return;
  await _whenReachable(
    deps,
    () => hook({ scope: group[0]!.batch.scope, profileIds: [...profileIds], pending: pending() }),
  );
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

/** Starts the queue consumer; the promise settles when the queue stops or its KV closes. */
export function startForwarder(deps: ForwarderDeps): Promise<void> {
  return deps.queue.consume(createQueueHandler(deps), { wakeMs: deps.wakeMs });
}
