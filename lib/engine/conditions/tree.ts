/**
 * The typed condition tree that parsing returns and compilation walks: every property is already
 * resolved to its source, every value parsed to what it is compared as (text, a number, or the
 * span of instants a date stands for, resolved against the `now` the tree was parsed at). A tree
 * of this type is valid by construction; nothing downstream checks it again.
 *
 * @module
 */
import type { PropertySource } from "./properties.ts";
import type { Condition, ConditionIssue } from "./vocabulary.ts";

/** A value a property is compared with. */
export type Scalar =
  | { type: "text"; value: string }
  | { type: "numeric"; value: number }
  /** The span [lo, hi) of epoch milliseconds a date value stands for (its precision). */
  | { type: "timestamptz"; lo: number; hi: number };

/** A list of values of one type (`in`, `all`, `hasSomeOf` and their negations). */
export type ScalarList =
  | { type: "text"; values: string[] }
  | { type: "numeric"; values: number[] }
  | { type: "timestamptz"; spans: [number, number][] };

/** What a property condition tests, its negative operators written as `negated`. */
export type PropertyTest =
  | { op: "exists" }
  | { op: "eq" | "gt" | "gte" | "lt" | "lte"; value: Scalar }
  | { op: "between"; from: Scalar; to: Scalar }
  | { op: "contains" | "startsWith" | "endsWith" | "matchesRegex"; value: string }
  /** Some value of the property is in the list (`in`, `hasSomeOf`). */
  | { op: "in"; values: ScalarList }
  /** Every value of the list is among the property's values. */
  | { op: "all"; values: ScalarList }
  | { op: "inContains"; values: string[] }
  | { op: "isDay"; value: Extract<Scalar, { type: "timestamptz" }> };

/** A node of a parsed condition. */
export type ConditionNode =
  | { type: "and" | "or"; subConditions: ConditionNode[] }
  | { type: "not"; subCondition: ConditionNode }
  | { type: "matchAll" }
  | { type: "eventType"; eventTypeId: string }
  | {
    type: "pastEvents";
    eventCondition: ConditionNode;
    /** Events strictly after this instant (numberOfDays), in epoch milliseconds. */
    after?: number;
    /** Events from this instant (fromDate's start). */
    from?: number;
    /** Events before this instant (toDate's end). */
    until?: number;
    /** The events counted must be at least min and (when given) at most max. */
    min: number;
    max?: number;
  }
  | {
    type: "property";
    /** A sessionPropertyCondition: the property is a session's, probed from the item. */
    session: boolean;
    source: PropertySource;
    test: PropertyTest;
    /** notEquals, notIn, notContains, hasNoneOf, isNotDay, missing. */
    negated: boolean;
  };

/** What a condition costs to evaluate, read from its tree. */
export interface ConditionCost {
  /** matchesRegex comparisons. */
  patterns: number;
  /** pastEventCondition and sessionPropertyCondition nodes: each reads another table. */
  probes: number;
  nodes: number;
}

/** A parsed condition: its typed tree, its canonical JSON (what is stored) and its cost. */
export interface ParsedCondition {
  tree: ConditionNode;
  json: Condition;
  cost: ConditionCost;
}

/** The outcome of `validateCondition`. */
export type ConditionValidation =
  | { ok: true; condition: Condition; tree: ConditionNode; cost: ConditionCost }
  | { ok: false; issues: ConditionIssue[] };
