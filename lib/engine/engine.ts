/**
 * The customer-data engine: it owns profiles, sessions and events in Postgres. `Engine` (here) is
 * what the gateway sees, with `checkEvent`; `embedded.ts` implements it over the service's own
 * database through `apply_events.ts`. Beside it: the event-type registry (`event_types.ts`),
 * `updateProperties` (`update_properties.ts`), profile reads (`profiles.ts`), the condition
 * language (`conditions.ts` and `conditions/`), the caller-condition policy
 * (`caller_condition.ts`), segments (`segments.ts`) and the query API's reads (`queries.ts`).
 * Engine modules throw `DomainError` and take `sql`, never the app's dependencies.
 *
 * @module
 */
import { checkEventProperties, findEventType } from "./event_types.ts";
import { checkUpdateProperties, type UpdatePropertiesPayload } from "./update_properties.ts";
import type { Tx } from "../store/db.ts";

/** An event accepted at the edge, with its server id. */
export interface IngestEvent {
  id: string;
  eventType: string;
  profileId: string;
  sessionId?: string;
  properties?: Record<string, unknown>;
  flattenedProperties?: Record<string, unknown>;
  timeStamp?: string;
  target?: { itemId: string; itemType: string; properties?: Record<string, unknown> };
}

/** Where a batch came from: server-side ingest or the storefront pixel proxy. */
export type EventSource = "server" | "pixel";

/** Events of one scope, applied together. */
export interface EventBatch {
  scope: string;
  source: EventSource;
  receivedAt: string;
  events: IngestEvent[];
  /**
   * The `EVENT_REGISTRY_VERSION` (event_types.ts) the edge checked every event against
   * ({@linkcode checkEvent}); the engine checks them again only when it runs another version (a
   * message queued before an upgrade). Absent: unchecked (the sync path, a replayed fix).
   */
  checked?: string;
}

/** What an {@linkcode EventAdmission} sees of an event about to be stored. */
export interface AdmittedEvent {
  id: string;
  profileId: string;
  /** When the edge accepted it (its batch's `receivedAt`). */
  receivedAt: string;
  properties: Record<string, unknown>;
}

/**
 * A hook of the apply transaction: asked under the scope's write lock, before anything is
 * stored, which events to drop. A dropped event stores nothing (no event, profile, session or
 * visit) and its result is that of an event already stored. Privacy (lib/privacy) implements it:
 * erased and suppressed people are dropped there, so a batch queued before an erase cannot bring
 * the person back. It may write its own counts in `tx`.
 */
export interface EventAdmission {
  drop(
    tx: Tx,
    scope: string,
    events: readonly AdmittedEvent[],
  ): Promise<ReadonlySet<string>>;
}

/** The engine's answer for one event (the synchronous ingest's `results[]`, without the index). */
export type ApplyResult =
  | { ok: true; status: 200; result: { updated: number; processedItems: number } }
  | { ok: false; status: number; error: string };

/**
 * The customer-data engine as the gateway sees it. The embedded engine runs on Postgres; an
 * adapter for an external engine (Apache Unomi over HTTP) can implement the same interface.
 */
export interface Engine {
  /** Checks one event against its type's schema: null when it can be applied. */
  checkEvent(event: IngestEvent): { status: number; error: string } | null;
  /**
   * Applies a batch in one transaction, idempotently by event id. Permanent per-event failures
   * (a schema problem, or values the store refuses) are results with a 4xx status and the
   * others apply; a thrown error means nothing was stored and a retry may work.
   * Past `deadline` (epoch ms) it throws and stores nothing; with a `gate`, it asks the gate
   * right before it commits and rolls back when refused.
   */
  applyEvents(
    batch: EventBatch,
    options?: { deadline?: number; gate?: CommitGate },
  ): Promise<ApplyResult[]>;
  /**
   * Optional: applies several batches of one scope and source in one transaction, with the
   * effects of `applyEvents` on each in turn; the results are per batch. The forwarder groups
   * queued messages through it when the engine has it.
   */
  applyEventGroup?(batches: EventBatch[]): Promise<ApplyResult[][]>;
}

/**
 * Where a caller's time budget meets the engine's commit: whichever comes first wins. Once the
 * engine has begun to commit, the budget can no longer run out (the caller waits for the
 * commit's outcome); once the budget has run out, the engine can no longer begin to commit (it
 * rolls back). An answer given at the budget's end is therefore never contradicted by a commit.
 */
export interface CommitGate {
  /** Asked by the engine right before it commits: true to commit, false to roll back. */
  beginCommit(): boolean;
}

/** A {@linkcode CommitGate} with the budget's side. */
export interface BudgetGate extends CommitGate {
  /** The budget ran out: true when that wins (no commit will begin), false when a commit has. */
  expire(): boolean;
  /** True once the engine has begun to commit. */
  readonly committing: boolean;
}

/** A fresh gate: neither committing nor expired. */
export function createCommitGate(): BudgetGate {
  let state: "open" | "committing" | "expired" = "open";
  return {
    beginCommit() {
      // A second transaction of the same call (the retry that isolates refused events) may
      // commit too: the caller is already waiting for the outcome.
      if (state === "expired") return false;
      state = "committing";
      return true;
    },
    expire() {
      if (state === "committing") return false;
      state = "expired";
      return true;
    },
    get committing() {
      return state === "committing";
    },
  };
}

/** Checks an event against the registry: type known, properties valid, updates well-formed. */
export function checkEvent(event: IngestEvent): { status: number; error: string } | null {
  const def = findEventType(event.eventType);
  if (!def) return { status: 400, error: `no registered schema for event type ${event.eventType}` };
  const problem = checkEventProperties(def, event.properties ?? {});
  if (problem) return { status: 400, error: problem };
  if (def.name === "updateProperties") {
    const payload = (event.properties ?? {}) as UpdatePropertiesPayload;
    if (payload.targetId !== undefined && payload.targetId !== event.profileId) {
      return { status: 403, error: "updateProperties may only target the event's own profile" };
    }
    const invalid = checkUpdateProperties(payload);
    if (invalid) return { status: 400, error: invalid };
  }
  return null;
}
