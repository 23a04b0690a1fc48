/**
 * The forwarder's workload, shared by the ingest benchmark (bench/ingest_load.ts) and its floor
 * process (bench/ingest_floor.ts), so that both write the same rows: seeded batches per traffic
 * shape, and the rows a plain INSERT of them stores.
 *
 * @module
 */
import type { EventBatch, IngestEvent } from "../lib/engine/engine.ts";

/** Events per batch (and per floor INSERT). */
export const BATCH = 50;
/** Events per profile (and session) in the realistic shape. */
export const EVENTS_PER_PROFILE = 10;

/** The shop the events' page URLs name (the benchmark's brand). */
export const SHOP = "bench.myshopify.com";

/** The traffic: every event a new profile, or ten events per profile and session. */
export type Shape = "new profiles" | "realistic";
/** Every traffic shape, in the order the benchmark runs them. */
export const SHAPES: Shape[] = ["new profiles", "realistic"];

/** A small seeded PRNG (mulberry32), so every run sends the same workload. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The batches of a forwarder run: unique profiles per `run` and `shape`. */
export function makeBatches(
  scope: string,
  count: number,
  shape: Shape,
  run: string,
  newId: () => string,
): EventBatch[] {
  const random = prng(count);
  const perProfile = shape === "realistic" ? EVENTS_PER_PROFILE : 1;
  const batches: EventBatch[] = [];
  for (let i = 0; i < count; i += BATCH) {
    const events: IngestEvent[] = Array.from({ length: Math.min(BATCH, count - i) }, (_, j) => {
      const k = Math.floor((i + j) / perProfile);
      const n = 1 + Math.floor(random() * 1000);
      return {
        id: newId(),
        eventType: "page_viewed",
        profileId: `${run}_${k}`,
        sessionId: `${run}_s${k}`,
        properties: { url: `https://${SHOP}/products/${n}`, title: `Product ${n}` },
      };
    });
    batches.push({ scope, source: "server", receivedAt: new Date().toISOString(), events });
  }
  return batches;
}

/** The rows the engine would store, as a DBA's INSERT sends them. */
export function rawRows(batch: EventBatch) {
  return batch.events.map((e) => ({
    scope: batch.scope,
    id: e.id,
    profile_id: e.profileId,
    session_id: e.sessionId!,
    event_type: e.eventType,
    time_stamp: batch.receivedAt,
    properties: JSON.stringify(e.properties ?? {}),
    flattened_properties: "{}",
    target: null,
    source: batch.source,
    received_at: batch.receivedAt,
  }));
}
