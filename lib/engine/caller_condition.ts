/**
 * The one policy for a caller's condition: what the service does to a tree a brand sent before
 * it is stored (segments) or evaluated (queries), so a count and a segment's membership agree.
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import {
  type Condition,
  conditionCost,
  injectScopePredicate,
  type ItemType,
  MAX_CONDITION_PATTERNS,
  parseCondition,
  stripScopePredicates,
} from "./conditions.ts";

/**
 * Refuses a tree with more matchesRegex patterns than {@linkcode MAX_CONDITION_PATTERNS}: 400
 * `invalid_condition` naming the limit.
 */
function _assertPatterns(condition: Condition, path: string): void {
  const { patterns } = conditionCost(condition);
  if (patterns > MAX_CONDITION_PATTERNS) {
    throw new DomainError(
      "invalid_condition",
      `invalid condition: ${path}: has ${patterns} matchesRegex patterns; a condition may hold ` +
        `at most ${MAX_CONDITION_PATTERNS} (MAX_CONDITION_PATTERNS)`,
    );
  }
}

/**
 * Prepares a caller's segment condition for storage: strip every scope predicate (a foreign
 * one too), validate what remains against the public vocabulary, then AND-inject the brand's.
 * The result is validated as the compiler will (limits included), so a stored segment always
 * compiles; it holds at most {@linkcode MAX_CONDITION_PATTERNS} matchesRegex patterns.
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
  const parsed = parseCondition(stripped, { itemType: "profile", root: path, scopeInjected: true });
  _assertPatterns(parsed, path);
  const condition = injectScopePredicate(parsed, scope);
  return parseCondition(condition, { itemType: "profile", root: path, allowScope: true });
}

/**
 * Prepares a caller's query condition (absent: the whole scope): validate it (scope references
 * refused, at most {@linkcode MAX_CONDITION_PATTERNS} patterns) and, for profiles, AND-inject the same scope predicate segments carry.
 */
export function queryCondition(
  raw: unknown,
  itemType: ItemType,
  scope: string,
  path = "$.condition",
): Condition | null {
  const condition = raw === undefined
    ? null
    : parseCondition(raw, { itemType, root: path, scopeInjected: itemType === "profile" });
  if (condition) _assertPatterns(condition, path);
  return itemType === "profile" ? injectScopePredicate(condition, scope) : condition;
}
