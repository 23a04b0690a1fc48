/**
 * What a condition costs to evaluate, read from its parsed tree: its matchesRegex patterns (each
 * one a regular expression PostgreSQL compiles on every connection that meets it, and keeps only
 * the last 32 of), its probes of other tables (past events, sessions) and its nodes.
 *
 * @module
 */
import type { ConditionCost, ConditionNode } from "./tree.ts";

export type { ConditionCost } from "./tree.ts";

/**
 * matchesRegex patterns one condition a caller sends may hold. A distinct pattern can cost
 * PostgreSQL a good part of a second to compile, so this bounds what one segment or query can
 * ask of the database before its rows are even read.
 */
export const MAX_CONDITION_PATTERNS = 20;

/** Counts the patterns, probes and nodes of a parsed tree. */
export function conditionCost(tree: ConditionNode): ConditionCost {
  const cost: ConditionCost = { patterns: 0, probes: 0, nodes: 0 };
  // An explicit stack: a parsed tree is at most 10 deep, but this never recurses anyway.
  const stack: ConditionNode[] = [tree];
  while (stack.length > 0) {
    const node = stack.pop()!;
    cost.nodes += 1;
    switch (node.type) {
      case "and":
      case "or":
        stack.push(...node.subConditions);
        break;
      case "not":
        stack.push(node.subCondition);
        break;
      case "pastEvents":
        cost.probes += 1;
        stack.push(node.eventCondition);
        break;
      case "property":
        if (node.session) cost.probes += 1;
        if (node.test.op === "matchesRegex") cost.patterns += 1;
        break;
    }
  }
  return cost;
}
