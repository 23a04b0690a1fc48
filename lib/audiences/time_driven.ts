/**
 * Segments whose truth moves with time alone, and the sweep that re-evaluates them. A condition
 * moves with time when its parsed tree depends on `now` (date math such as `now-90d`, a
 * `pastEventCondition`'s `numberOfDays` window: the tree resolves them to instants, so parsing it
 * at two instants far apart gives two trees) or when it reads predictions (refitted in the
 * background, not by events).
 *
 * @module
 */
import { log } from "../log.ts";
import { DomainError } from "../errors.ts";
import { storedCondition } from "../engine/caller_condition.ts";
import type { Condition, ConditionNode } from "../engine/conditions.ts";
import { type MembershipDeps, refreshSegment } from "./membership.ts";

/** Farther than the coarsest rounding of date math (`now/y`), so any dependence on `now` shows. */
const _LATER_MS = 400 * 86_400_000;

/** Whether a stored condition's members can change with time alone (see the module). */
export function movesWithTime(condition: Condition, now: Date): boolean {
  let at: ConditionNode;
  let later: ConditionNode;
  try {
    at = storedCondition(condition, now).tree;
    later = storedCondition(condition, new Date(now.getTime() + _LATER_MS)).tree;
  } catch (err) {
    if (!(err instanceof DomainError) || err.kind !== "invalid_condition") throw err;
    // It stops parsing as time goes by (a date leaving the window): its members will exit.
    return true;
  }
  return JSON.stringify(at) !== JSON.stringify(later) || _readsPredictions(at);
}

function _readsPredictions(node: ConditionNode): boolean {
  switch (node.type) {
    case "and":
    case "or":
      return node.subConditions.some(_readsPredictions);
    case "not":
      return _readsPredictions(node.subCondition);
    case "pastEvents":
      return _readsPredictions(node.eventCondition);
    case "property":
      return node.source.kind !== "json" && node.source.column.startsWith("pred.");
    default:
      return false;
  }
}

/** What one sweep did. */
export interface SweepOutcome {
  segments: number;
  entered: number;
  exited: number;
  failed: number;
}

/**
 * Refreshes every segment, of every brand, whose truth moves with time, one after another (each
 * on its brand's budget); a segment that fails is logged and counted, the others still run.
 */
export async function sweepTimeDriven(deps: MembershipDeps): Promise<SweepOutcome> {
  const now = deps.now();
  const segments = await deps.sql<{ scope: string; id: string; condition: Condition }[]>`
    select scope, id, condition from segments order by scope, id`;
  const outcome: SweepOutcome = { segments: 0, entered: 0, exited: 0, failed: 0 };
  for (const segment of segments) {
    if (!movesWithTime(segment.condition, now)) continue;
    outcome.segments++;
    try {
      const done = await refreshSegment(deps, segment.scope, segment.id);
      outcome.entered += done.entered;
      outcome.exited += done.exited;
    } catch (err) {
      outcome.failed++;
      log("error", "segment membership sweep failed", {
        scope: segment.scope,
        segment: segment.id,
        error: String(err),
      });
    }
  }
  return outcome;
}
