/**
 * The condition vocabulary: node and option types, the public condition types, the comparison
 * operators with their value parameters, and the limits a tree must keep.
 *
 * @module
 */
import type postgres from "postgres";

/** What a condition selects. */
export type ItemType = "profile" | "event";
/** What a property condition reads: an item, or the session of one (sessionPropertyCondition). */
export type PropertyContext = ItemType | "session";

/**
 * A Unomi condition node in its canonical JSON form (`parameterValues` always present): what is
 * stored and shown. Evaluation works on the typed tree parsing returns (tree.ts).
 */
export interface Condition {
  type: string;
  parameterValues: Record<string, unknown>;
}

/** One problem in a condition, located by JSON path. */
export interface ConditionIssue {
  path: string;
  message: string;
}

/** Options of `validateCondition` and `parseCondition`. */
export interface ConditionOptions {
  itemType: ItemType;
  /** Allow references to scope/shopDomain (only for trees the service itself wrote). */
  allowScope?: boolean;
  /** JSON path of the condition in its document; `$` by default. */
  root?: string;
  /**
   * The service will AND-inject the scope predicate around this tree, which takes one level and
   * two nodes of the limits: the tree gets what remains, so the injected one stays valid.
   */
  scopeInjected?: boolean;
  /**
   * Anchors date math (`now-30d`): the window check and the instants the parsed tree holds; the
   * current time by default.
   */
  now?: Date;
  /** Refuse more than MAX_CONDITION_PATTERNS matchesRegex patterns (a caller's tree). */
  capPatterns?: boolean;
}

/** A postgres.js fragment: interpolate it in a sql`...` query, never await it on its own. */
export type SqlFragment = postgres.PendingQuery<postgres.Row[]>;

/** Nesting levels a tree may have. */
export const MAX_CONDITION_DEPTH = 10;
/** Nodes a tree may have. */
export const MAX_CONDITION_NODES = 200;
/** Values a list parameter may hold. */
export const MAX_CONDITION_VALUES = 1000;
/** Characters a matchesRegex pattern may have. */
export const MAX_REGEX_LENGTH = 200;
/**
 * Items a matchesRegex pattern may expand to once its bounded repetitions are copied out, a
 * character weighing 1 and a class more (lib/engine/conditions/regex.ts).
 */
export const MAX_REGEX_ITEMS = 10_000;
/**
 * The largest compile cost of a matchesRegex pattern (lib/engine/conditions/regex.ts), in arcs
 * added for empty ones: a run of 127 optional characters, `(.?){127}`, costs 8,128.
 */
export const MAX_REGEX_COST = 8_192;
/** Issues listed at most; one more says that the list was cut. */
export const MAX_CONDITION_ISSUES = 100;
/** The largest numberOfDays of a pastEventCondition. */
export const MAX_NUMBER_OF_DAYS = 36_500;

/** The public condition types. */
export const CONDITION_TYPES = [
  "booleanCondition",
  "notCondition",
  "matchAllCondition",
  "profilePropertyCondition",
  "eventPropertyCondition",
  "eventTypeCondition",
  "pageViewEventCondition",
  "pastEventCondition",
  "sessionPropertyCondition",
] as const;

const _NOT_MODELLED = "a Unomi-side feature the engine does not model";
const _SCRIPTED =
  "Unomi defines it through script:: or parameter:: resolvers, which are never run here";
const _SOURCE =
  "it reads the event's source, which the contract forbids on an event (no source is stored)";

/**
 * Apache Unomi 2.7's other condition types, each with why it is out of scope: a condition
 * naming one is refused with this reason rather than as an unknown type.
 */
export const UNOMI_REFUSED_TYPES = new Map<string, string>([
  [
    "nestedCondition",
    "it matches several fields within one element of an array of objects (Elasticsearch nested " +
    "documents), which the engine does not index",
  ],
  ["geoLocationByPointSessionCondition", "geo-point queries are not supported (no geo index)"],
  ["geoLocationSessionCondition", "session geo-location is not stored"],
  ["profileSegmentCondition", "profiles carry no stored segment list (membership is computed)"],
  ["scoringCondition", `scoring plans are ${_NOT_MODELLED}`],
  ["goalMatchCondition", `goals are ${_NOT_MODELLED}`],
  ["profileUserListCondition", `user lists are ${_NOT_MODELLED}`],
  ["profileAliasesPropertyCondition", "profile alias records are not addressable"],
  ["topicPropertyCondition", `topics are ${_NOT_MODELLED}`],
  ["IdsCondition", "it selects items by Elasticsearch document id"],
  ["sourceEventPropertyCondition", _SOURCE],
  ["newVisitorCondition", _SCRIPTED],
  ["returningVisitorCondition", _SCRIPTED],
  ["sessionDurationCondition", `${_SCRIPTED} (write sessionPropertyCondition on duration)`],
  ["formEventCondition", _SCRIPTED],
  ["videoViewEventCondition", _SCRIPTED],
  ["hoverEventCondition", _SCRIPTED],
  ["modifyConsentEventCondition", _SCRIPTED],
  ["modifyAnyConsentEventCondition", _SCRIPTED],
  ["sessionCreatedEventCondition", "sessionCreated events are not generated by the engine"],
  ["profileUpdatedEventCondition", "profileUpdated events are not generated by the engine"],
  [
    "updateProfilePropertiesEventCondition",
    'write eventTypeCondition with eventTypeId "updateProperties"',
  ],
]);

/** Apache Unomi 2.7's comparison operators that are out of scope, with why. */
export const UNOMI_REFUSED_OPERATORS = new Map<string, string>([
  ["distance", "geo distance needs geo-point properties, which the engine does not index"],
]);

/** How many values an operator takes. */
export type Arity = "none" | "single" | "pair" | "list";
/** The comparison type a value parameter selects. */
export type ValueKind = "string" | "integer" | "double" | "date" | "dateExpr";

/** Every value kind. */
export const ALL_KINDS: readonly ValueKind[] = ["string", "integer", "double", "date", "dateExpr"];

/** The public comparison operators (Unomi 2.7 without `distance`), with their value arity and kinds. */
export const OPERATORS = new Map<string, { arity: Arity; kinds: readonly ValueKind[] }>([
  ["equals", { arity: "single", kinds: ALL_KINDS }],
  ["notEquals", { arity: "single", kinds: ALL_KINDS }],
  ["greaterThan", { arity: "single", kinds: ALL_KINDS }],
  ["greaterThanOrEqualTo", { arity: "single", kinds: ALL_KINDS }],
  ["lessThan", { arity: "single", kinds: ALL_KINDS }],
  ["lessThanOrEqualTo", { arity: "single", kinds: ALL_KINDS }],
  ["between", { arity: "pair", kinds: ALL_KINDS }],
  ["exists", { arity: "none", kinds: [] }],
  ["missing", { arity: "none", kinds: [] }],
  ["contains", { arity: "single", kinds: ["string"] }],
  ["notContains", { arity: "single", kinds: ["string"] }],
  ["startsWith", { arity: "single", kinds: ["string"] }],
  ["endsWith", { arity: "single", kinds: ["string"] }],
  ["matchesRegex", { arity: "single", kinds: ["string"] }],
  ["in", { arity: "list", kinds: ALL_KINDS }],
  ["notIn", { arity: "list", kinds: ALL_KINDS }],
  ["all", { arity: "list", kinds: ALL_KINDS }],
  ["inContains", { arity: "list", kinds: ["string"] }],
  ["hasSomeOf", { arity: "list", kinds: ALL_KINDS }],
  ["hasNoneOf", { arity: "list", kinds: ALL_KINDS }],
  ["isDay", { arity: "single", kinds: ["date", "dateExpr"] }],
  ["isNotDay", { arity: "single", kinds: ["date", "dateExpr"] }],
]);

/** The value parameters, each with its kind and whether it holds a list. */
export const VALUE_PARAMS = new Map<string, { kind: ValueKind; plural: boolean }>([
  ["propertyValue", { kind: "string", plural: false }],
  ["propertyValueInteger", { kind: "integer", plural: false }],
  ["propertyValueDouble", { kind: "double", plural: false }],
  ["propertyValueDate", { kind: "date", plural: false }],
  ["propertyValueDateExpr", { kind: "dateExpr", plural: false }],
  ["propertyValues", { kind: "string", plural: true }],
  ["propertyValuesInteger", { kind: "integer", plural: true }],
  ["propertyValuesDouble", { kind: "double", plural: true }],
  ["propertyValuesDate", { kind: "date", plural: true }],
  ["propertyValuesDateExpr", { kind: "dateExpr", plural: true }],
]);
/** The names of the value parameters. */
export const VALUE_KEYS = [...VALUE_PARAMS.keys()];

/** How messages name each value kind. */
export const KIND_TEXT: Record<ValueKind, string> = {
  string: "a string",
  integer: "an integer (a JSON integer or a string of digits)",
  double: "a number (a JSON number or a decimal string)",
  date: "an ISO 8601 date-time (e.g. 2026-01-31T12:00:00Z) or epoch milliseconds",
  dateExpr: "a date math expression (e.g. now-30d, now/d, 2026-01-01T00:00:00Z||+1M), an ISO " +
    "8601 date-time or epoch milliseconds",
};
