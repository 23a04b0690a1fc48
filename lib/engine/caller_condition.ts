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
  type ItemType,
  parseCondition,
  type ParsedCondition,
  stripScopePredicates,
} from "./conditions.ts";

/**
 * Prepares a caller's segment condition for storage: strip every scope predicate (a foreign
 * one too) and parse what remains against the public vocabulary (at most
 * MAX_CONDITION_PATTERNS matchesRegex patterns, the limits less what the brand's scope
 * predicate takes in the form the API shows). Returns the canonical JSON of the caller's tree:
 * what is stored, the scope living in the row's `scope` column.
 */
export function segmentCondition(raw: unknown, path = "$.condition"): Condition {
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
  return parsed.json;
}

/**
 * A stored segment condition (the caller's tree) parsed for evaluation at `now`; the enclosing
 * query filters on the segment's scope column. A row that no longer parses (a date that left
 * the window as `now` moved, a rule added since) throws 400 `invalid_condition`, its paths those
 * of the stored JSON. A scope predicate, which only a row stored before the scope lived in the
 * column alone can hold, reads that column.
 */
export function storedCondition(stored: unknown, now: Date): ParsedCondition {
  return parseCondition(stored, { itemType: "profile", root: "$", allowScope: true, now });
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
