import type { Engine } from "../lib/engine/engine.ts";
import { type EventsMessage, isEventsMessage, writeDeadLetter } from "../lib/ingest_queue.ts";

/** What the forwarder needs: the queue's store, the engine and a clock. */
export interface ForwarderDeps {
  kv: Deno.Kv;
  engine: Engine;
  now: () => Date;
}

/**
 * The one handler of the KV queue, dispatching on the message kind. Delivery is at-least-once,
 * so every kind must be idempotent (the engine skips event ids it already stored).
 *
 * A thrown error is transient (the engine stored nothing): KV redelivers on the message's
 * backoff schedule and, when that runs out, writes the message to its dead-letter key. Events
 * the engine rejects permanently (4xx) are dead-lettered at once with the reason, not retried.
 */
export function createQueueHandler(deps: ForwarderDeps): (message: unknown) => Promise<void> {
  return async function handleQueueMessage(message) {
    if (isEventsMessage(message)) return await _forwardEvents(deps, message);
    console.error(JSON.stringify({ level: "error", message: "unknown queue message dropped" }));
  };
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

/** Starts the queue consumer; the promise settles when the KV handle closes. */
export function startForwarder(deps: ForwarderDeps): Promise<void> {
  return deps.kv.listenQueue(createQueueHandler(deps));
}
