/**
 * The one policy for a caller's condition: what the service does to a tree a brand sent before
 * it is stored (segments) or evaluated (queries), so a count and a segment's membership agree,
 * and how a stored segment condition is read back for evaluation.
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import {
  type Condition,
  type ConditionNode,
  injectScopePredicate,
  type ItemType,
  parseCondition,
  type ParsedCondition,
  storedCallerTree,
  stripScopePredicates,
} from "./conditions.ts";

/**
 * Prepares a caller's segment condition for storage: strip every scope predicate (a foreign
 * one too), parse what remains against the public vocabulary (at most
 * MAX_CONDITION_PATTERNS matchesRegex patterns, the limits less what the scope predicate takes),
 * then AND-inject the brand's predicate into its canonical JSON: the form stored and shown.
 */
export function scopedCondition(raw: unknown, scope: string, path = "$.condition"): Condition {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new DomainError("invalid_input", "condition must be an object");
  }
  const stripped = stripScopePredicates(raw);
  if (stripped === null) {
    throw new DomainError(
      "invalid_input",
      "condition is empty once the scope predicate is removed",
    );
  }
  const parsed = parseCondition(stripped, {
    itemType: "profile",
    root: path,
    scopeInjected: true,
    capPatterns: true,
  });
  return injectScopePredicate(parsed.json, scope);
}

/**
 * A stored segment condition parsed for evaluation at `now`: the caller's tree, without the
 * injected scope predicate (the enclosing query filters on the scope). A row that no longer
 * parses (a date that left the window as `now` moved, a rule added since) throws 400
 * `invalid_condition`, its paths those of the stored JSON.
 */
export function storedCondition(stored: unknown, scope: string, now: Date): ParsedCondition {
  const { tree, path } = storedCallerTree(stored, scope);
  return parseCondition(tree, { itemType: "profile", root: path, allowScope: true, now });
}

/**
 * Parses a caller's query condition (absent: the whole scope, null): scope references refused,
 * at most MAX_CONDITION_PATTERNS patterns, and for profiles the limits less what the scope
 * predicate segments carry takes, so a count and a segment accept the same trees. The scope is
 * the enclosing query's filter.
 */
export function queryCondition(
  raw: unknown,
  itemType: ItemType,
  now: Date,
  path = "$.condition",
): ConditionNode | null {
  if (raw === undefined) return null;
  return parseCondition(raw, {
    itemType,
    root: path,
    scopeInjected: itemType === "profile",
    capPatterns: true,
    now,
  }).tree;
}
