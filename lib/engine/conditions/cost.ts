/**
 * What a condition costs to evaluate, read from its tree: its matchesRegex patterns (each one a
 * regular expression PostgreSQL compiles on every connection that meets it, and keeps only the
 * last 32 of), its probes of other tables (past events, sessions) and its nodes.
 *
 * @module
 */
import { isObject, own } from "./shape.ts";
import type { Condition } from "./vocabulary.ts";

/**
 * matchesRegex patterns one condition a caller sends may hold. A distinct pattern can cost
 * PostgreSQL a good part of a second to compile, so this bounds what one segment or query can
 * ask of the database before its rows are even read.
 */
export const MAX_CONDITION_PATTERNS = 20;

/** The parts of a tree that decide how long it takes to evaluate. */
export interface ConditionCost {
  /** matchesRegex comparisons. */
  patterns: number;
  /** pastEventCondition and sessionPropertyCondition nodes: each reads another table. */
  probes: number;
  nodes: number;
}

/** Counts the patterns, probes and nodes of a tree (anything not a condition counts as nothing). */
export function conditionCost(condition: Condition | unknown): ConditionCost {
  const cost: ConditionCost = { patterns: 0, probes: 0, nodes: 0 };
  // An explicit stack: a stored tree is validated to depth 10, but this never recurses anyway.
  const stack: unknown[] = [condition];
  while (stack.length > 0) {
    const node = stack.pop();
    if (!isObject(node)) continue;
    const params = own(node, "parameterValues");
    if (!isObject(params)) continue;
    cost.nodes += 1;
    const subs = own(params, "subConditions");
    switch (own(node, "type")) {
      case "booleanCondition":
        if (Array.isArray(subs)) stack.push(...subs);
        break;
      case "notCondition":
        stack.push(own(params, "subCondition"));
        break;
      case "pastEventCondition":
        cost.probes += 1;
        stack.push(own(params, "eventCondition"));
        break;
      case "sessionPropertyCondition":
        cost.probes += 1;
        if (own(params, "comparisonOperator") === "matchesRegex") cost.patterns += 1;
        break;
      default:
        if (own(params, "comparisonOperator") === "matchesRegex") cost.patterns += 1;
    }
  }
  return cost;
}
