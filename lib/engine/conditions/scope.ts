/**
 * Scope predicates: the one the service AND-injects around a caller's tree, and the stripping of
 * any the caller wrote.
 *
 * @module
 */
import { SCOPE_PROPERTY_NAMES } from "./properties.ts";
import { isObject, own } from "./shape.ts";
import type { Condition } from "./vocabulary.ts";

/** The scope predicate the service injects: `properties.shopDomain` equals the scope. */
export function scopePredicate(scope: string): Condition {
  return {
    type: "profilePropertyCondition",
    parameterValues: {
      propertyName: "properties.shopDomain",
      comparisonOperator: "equals",
      propertyValue: scope,
    },
  };
}

/** AND-injects the scope predicate (just the predicate when there is no condition). */
export function injectScopePredicate(
  condition: Condition | null | undefined,
  scope: string,
): Condition {
  if (condition === null || condition === undefined) return scopePredicate(scope);
  return {
    type: "booleanCondition",
    parameterValues: { operator: "and", subConditions: [scopePredicate(scope), condition] },
  };
}

function _isScopePredicate(node: Record<string, unknown>): boolean {
  const type = own(node, "type");
  if (
    type !== "profilePropertyCondition" && type !== "eventPropertyCondition" &&
    type !== "sessionPropertyCondition"
  ) return false;
  const params = own(node, "parameterValues");
  if (!isObject(params)) return false;
  const name = own(params, "propertyName");
  return typeof name === "string" && SCOPE_PROPERTY_NAMES.has(name);
}

/**
 * Removes every scope predicate (a profile, event or session property condition on
 * properties.shopDomain,
 * properties.scope, scope or shopDomain, whatever its operator and value, a foreign one too):
 * it is dropped from and/or lists, a booleanCondition left with one sub-condition collapses to
 * it, a notCondition (or pastEventCondition's eventCondition) left empty goes too; null when
 * nothing remains. Pure: shares untouched subtrees, never mutates; does not validate.
 */
export function stripScopePredicates(condition: unknown): unknown | null {
  return _strip(condition, 0);
}

function _strip(node: unknown, depth: number): unknown | null {
  // Beyond any valid depth the validator rejects the tree anyway; stop before the stack does.
  if (depth > 64 || !isObject(node)) return node;
  if (_isScopePredicate(node)) return null;
  const params = own(node, "parameterValues");
  if (!isObject(params)) return node;
  const type = own(node, "type");
  if (type === "booleanCondition") {
    const subs = own(params, "subConditions");
    if (!Array.isArray(subs)) return node;
    let changed = false;
    let removed = false;
    const kept: unknown[] = [];
    for (const sub of subs) {
      const stripped = _strip(sub, depth + 1);
      if (stripped !== sub) changed = true;
      if (stripped === null) removed = true;
      else kept.push(stripped);
    }
    if (!changed) return node;
    if (kept.length === 0) return null;
    if (removed && kept.length === 1) return kept[0];
    return { ...node, parameterValues: { ...params, subConditions: kept } };
  }
  const key = type === "notCondition"
    ? "subCondition"
    : type === "pastEventCondition"
    ? "eventCondition"
    : null;
  if (key === null || !Object.hasOwn(params, key)) return node;
  const stripped = _strip(params[key], depth + 1);
  if (stripped === params[key]) return node;
  if (stripped === null) {
    if (type === "notCondition") return null;
    const { [key]: _removed, ...rest } = params;
    return { ...node, parameterValues: rest };
  }
  return { ...node, parameterValues: { ...params, [key]: stripped } };
}
