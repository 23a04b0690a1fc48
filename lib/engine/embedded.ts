/**
 * The embedded engine: the {@linkcode Engine} interface over this service's own Postgres.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { applyEventBatch, applyEventBatches } from "./apply_events.ts";
import { checkEvent, type Engine, type EventAdmission } from "./engine.ts";

/**
 * The embedded engine over Postgres; `admission` (privacy's) drops events before they are
 * stored, on every path: the forwarder, synchronous ingest and dead-letter replays.
 */
export function createEmbeddedEngine(
  deps: { sql: Sql; now: () => Date; admission?: EventAdmission },
): Engine {
  const base = { now: deps.now, admission: deps.admission };
  return {
    checkEvent,
    applyEvents: (batch, options = {}) => applyEventBatch(deps.sql, batch, { ...options, ...base }),
    applyEventGroup: (batches) => applyEventBatches(deps.sql, batches, base),
  };
}
