/**
 * The one policy for a caller's condition: what the service does to a tree a brand sent before
 * it is stored (segments) or evaluated (queries), so a count and a segment's membership agree.
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import {
  type Condition,
  injectScopePredicate,
  type ItemType,
  parseCondition,
  stripScopePredicates,
} from "./conditions.ts";

/**
 * Prepares a caller's segment condition for storage: strip every scope predicate (a foreign
 * one too), validate what remains against the public vocabulary, then AND-inject the brand's.
 * The result is validated as the compiler will (limits included), so a stored segment always
 * compiles.
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
  const condition = injectScopePredicate(
    parseCondition(stripped, { itemType: "profile", root: path, scopeInjected: true }),
    scope,
  );
  return parseCondition(condition, { itemType: "profile", root: path, allowScope: true });
}

/**
 * Prepares a caller's query condition (absent: the whole scope): validate it (scope references
 * refused) and, for profiles, AND-inject the same scope predicate segments carry.
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
  return itemType === "profile" ? injectScopePredicate(condition, scope) : condition;
}
