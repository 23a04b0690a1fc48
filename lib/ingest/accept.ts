/**
 * `acceptEvents`: the one call every ingest door makes (POST /cdp/events, the pixel proxy
 * /cdp/ingest, and the doors to come) once it has validated its events: they are stamped as
 * checked and handed to the ingest queue (queue.ts), under its backlog bound, in one KV commit.
 *
 * @module
 */
import type { EventSource } from "../engine/engine.ts";
import { EVENT_REGISTRY_VERSION } from "../engine/event_types.ts";
import type { AcceptedEvent } from "./edge.ts";
import type { IngestQueue } from "./queue.ts";

/** What accepting needs: the app's KV database, the ingest queue and a clock. */
export interface AcceptDeps {
  kv: Deno.Kv;
  queue: IngestQueue;
  now: () => Date;
}

/** Whose events these are: the brand and the scope its credential is bound to. */
export interface IngestBrand {
  brandId: string;
  scope: string;
}

/**
 * Queues events a door accepted (validated by `validateBatch` with the engine's `checkEvent`
 * among its checks: the forwarder does not check them again under the same event registry).
 * Either every event is queued or none is: `queue_full` (the backlog is at its bound) and
 * `service_unavailable` (the queue could not commit) are thrown with nothing accepted.
 *
 * `also` adds the request's own KV writes (its limiter counts and usage record) to the queue's
 * commit when the queue lives in the app's KV database; `folded` tells whether they went with it
 * (never for an empty batch, which commits nothing).
 */
export async function acceptEvents(
  deps: AcceptDeps,
  brand: IngestBrand,
  source: EventSource,
  events: AcceptedEvent[],
  options: { also?: (op: Deno.AtomicOperation) => void } = {},
): Promise<{ folded: boolean }> {
  if (events.length === 0) return { folded: false };
  const also = deps.queue.kv === deps.kv ? options.also : undefined;
  await deps.queue.accept({
    brandId: brand.brandId,
    batch: {
      scope: brand.scope,
      source,
      receivedAt: deps.now().toISOString(),
      events: events.map((a) => a.event),
      checked: EVENT_REGISTRY_VERSION,
    },
    sizes: events.map((a) => a.storedBytes),
    also,
  });
  return { folded: also !== undefined };
}
