/**
 * The embedded engine: the {@linkcode Engine} interface over this service's own Postgres.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { applyEventBatch, applyEventBatches } from "./apply_events.ts";
import { checkEvent, type Engine } from "./engine.ts";

/** The embedded engine over Postgres. */
export function createEmbeddedEngine(deps: { sql: Sql; now: () => Date }): Engine {
  return {
    checkEvent,
    applyEvents: (batch, options = {}) =>
      applyEventBatch(deps.sql, batch, { ...options, now: deps.now }),
    applyEventGroup: (batches) => applyEventBatches(deps.sql, batches, { now: deps.now }),
  };
}
