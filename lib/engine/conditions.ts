/**
 * The condition language (the engine's entry to lib/engine/conditions/): Apache Unomi 2.x
 * condition trees, parsed against the public allowlist into a typed tree (property sources
 * resolved, values parsed) and compiled, by walking that tree, to parameterized SQL over the
 * engine's tables (`profiles p`, `events e`).
 *
 * No SQL text is ever built from input: property names resolve through a closed map to a fixed
 * column or to `<fixed jsonb column> #> $n::text[]` with the path bound; every value is bound
 * (the containment screen of text `equals` binds its `{"path":[value]}` document as one value).
 *
 * Semantics follow Unomi on Elasticsearch, where a multi-valued (array) field matches when any of
 * its values matches, and a query on a missing field matches nothing:
 *
 * - A positive comparison (equals, greaterThan, ..., between, contains, startsWith, endsWith,
 *   matchesRegex, in, hasSomeOf, all, inContains, isDay) is false when the property is missing
 *   or JSON null, and on an array property it holds when any element satisfies it (`all`: every
 *   value is among the elements). Objects and nested arrays never match.
 * - The negative operators are exactly the negation of their positive form, so they are TRUE
 *   when the property is missing: notEquals = not equals, notIn = not in, notContains = not
 *   contains, hasNoneOf = not hasSomeOf, isNotDay = not isDay.
 * - `exists`: the property is present, not JSON null, and (for an array) has a non-null element,
 *   as Elasticsearch indexes no value for null, [] or [null]. `missing` = not exists.
 * - The value parameter decides the comparison type:
 *   - propertyValue(s): text. A string, number or boolean compares by its JSON text (the number
 *     5 equals "5"); ordering (greaterThan, between, ...) is by code point (collation "C").
 *     contains / startsWith / endsWith are case-sensitive; matchesRegex is anchored at both
 *     ends like Lucene (the whole value must match) and runs with Postgres `~`.
 *   - propertyValue(s)Integer / Double: numeric, only against JSON numbers (the string "5" is
 *     not the number 5, and a non-number never raises a cast error: it just does not match).
 *   - propertyValue(s)Date / DateExpr: timestamps, only against strings that are valid ISO 8601
 *     date-times (a time without offset is UTC). Like Elasticsearch, a value denotes the span of
 *     its precision: "2026-01-31" is the whole day, "now/d" the whole day, "now-30d" one
 *     millisecond. equals = within the span, greaterThan = after it, greaterThanOrEqualTo = from
 *     its start, lessThan = before its start, lessThanOrEqualTo = up to its end, between =
 *     from the first's start to the second's end; isDay = the same UTC day as the value.
 * - Columns (itemId, firstVisit, lastVisit, nbOfVisits; event timeStamp, eventType, ...) compare
 *   natively and accept only the matching value kinds (dates for dates, numbers for nbOfVisits,
 *   strings for ids); NULL columns behave as missing properties.
 * - pastEventCondition counts the profile's events (its own id and every alias id, same scope)
 *   that match `eventCondition` in the window and holds when min <= count <= max (default min 1,
 *   no max); eventsNotOccurred holds when there is none. numberOfDays = timeStamp after
 *   now-<n>d; fromDate/toDate are inclusive (toDate "now/d" includes all of today).
 * - Every compiled fragment is a plain boolean: never SQL NULL, so `not` is exact.
 *
 * The modules under `conditions/` hold the sections (vocabulary, the typed tree, properties,
 * dates, values, regex, parsing, normalization, scope predicates, compilation, evaluation cost);
 * import them through this module. See
 * docs/conditions.md for the language.
 *
 * @module
 */
export {
  type Condition,
  CONDITION_TYPES,
  type ConditionIssue,
  type ConditionOptions,
  type ItemType,
  MAX_CONDITION_DEPTH,
  MAX_CONDITION_ISSUES,
  MAX_CONDITION_NODES,
  MAX_CONDITION_VALUES,
  MAX_NUMBER_OF_DAYS,
  MAX_REGEX_LENGTH,
  type SqlFragment,
} from "./conditions/vocabulary.ts";
export {
  propertyExpression,
  type PropertySource,
  resolveProperty,
} from "./conditions/properties.ts";
export { inDateWindow, resolveDateExpr, timestampText } from "./conditions/dates.ts";
export { dateText, integerValue, numberValue } from "./conditions/values.ts";
export { parseCondition, validateCondition } from "./conditions/validation.ts";
export { injectScopePredicate, scopePredicate, stripScopePredicates } from "./conditions/scope.ts";
export type {
  ConditionNode,
  ConditionValidation,
  ParsedCondition,
  PropertyTest,
  Scalar,
  ScalarList,
} from "./conditions/tree.ts";
export { compileCondition, type CompileOptions } from "./conditions/compile.ts";
export { type ConditionCost, conditionCost, MAX_CONDITION_PATTERNS } from "./conditions/cost.ts";
