/**
 * Parsing of an untrusted condition tree against the public vocabulary and limits, to the typed
 * tree of {@link ./tree.ts}: property names resolved to their sources, values parsed (dates to
 * their spans at `now`); every problem is reported with its JSON path.
 *
 * @module
 */
import { DomainError } from "../../errors.ts";
import { conditionCost, MAX_CONDITION_PATTERNS } from "./cost.ts";
import { DAY, spanOf } from "./dates.ts";
import { normalizeCondition } from "./normalize.ts";
import { type PropertySource, resolveProperty, SOURCE_KINDS, SOURCE_TEXT } from "./properties.ts";
import { regexProblem } from "./regex.ts";
import { isObject, own, quote } from "./shape.ts";
import type {
  ConditionNode,
  ConditionValidation,
  ParsedCondition,
  PropertyTest,
  Scalar,
  ScalarList,
} from "./tree.ts";
import { dateText, integerValue, numberValue } from "./values.ts";
import {
  ALL_KINDS,
  type Arity,
  CONDITION_TYPES,
  type ConditionIssue,
  type ConditionOptions,
  type ItemType,
  KIND_TEXT,
  MAX_CONDITION_DEPTH,
  MAX_CONDITION_ISSUES,
  MAX_CONDITION_NODES,
  MAX_CONDITION_VALUES,
  MAX_NUMBER_OF_DAYS,
  OPERATORS,
  type PropertyContext,
  UNOMI_REFUSED_OPERATORS,
  UNOMI_REFUSED_TYPES,
  VALUE_KEYS,
  VALUE_PARAMS,
  type ValueKind,
} from "./vocabulary.ts";

interface _Walk {
  issues: ConditionIssue[];
  /** Every issue found, listed or not: a node is built only when none was found within it. */
  problems: number;
  truncated: boolean;
  nodes: number;
  maxDepth: number;
  maxNodes: number;
  /** Appended to a limit's message when the scope predicate takes part of it. */
  limitNote: string;
  allowScope: boolean;
  now: Date;
}

function _child(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)
    ? `${path}.${key}`
    : `${path}[${JSON.stringify(key.length > 100 ? `${key.slice(0, 100)}...` : key)}]`;
}

function _issue(w: _Walk, path: string, message: string): void {
  w.problems += 1;
  if (w.issues.length < MAX_CONDITION_ISSUES) w.issues.push({ path, message });
  else w.truncated = true;
}

/**
 * A string that is not a Unomi resolver (`script::` runs a script, `parameter::` a lookup) and
 * that PostgreSQL can take: no NUL, no unpaired surrogate (text cannot hold them).
 */
function _string(w: _Walk, value: unknown, path: string): value is string {
  if (typeof value !== "string") {
    _issue(w, path, "must be a string");
    return false;
  }
  if (value.includes("\0") || !value.isWellFormed()) {
    _issue(w, path, "must not contain a NUL character or an unpaired surrogate");
    return false;
  }
  if (value.startsWith("script::") || value.startsWith("parameter::")) {
    _issue(
      w,
      path,
      `${value.startsWith("script::") ? "script::" : "parameter::"} resolvers are out of scope: ` +
        "they run a script or look up a rule parameter, and nothing is evaluated here but the " +
        "condition itself",
    );
    return false;
  }
  return true;
}

function _unknownKeys(
  w: _Walk,
  params: Record<string, unknown>,
  path: string,
  allowed: readonly string[],
): void {
  for (const key of Object.keys(params)) {
    if (!allowed.includes(key)) _issue(w, _child(path, key), "unknown parameter");
  }
}

/**
 * Parses an untrusted tree against the public allowlist and reports every problem by JSON
 * path. `allowScope` false (the default) rejects any property name with a `scope` or
 * `shopDomain` segment; `capPatterns` refuses a tree with more than MAX_CONDITION_PATTERNS
 * matchesRegex patterns.
 */
export function validateCondition(raw: unknown, options: ConditionOptions): ConditionValidation {
  const root = options.root ?? "$";
  const injected = options.scopeInjected ?? false;
  const w: _Walk = {
    issues: [],
    problems: 0,
    truncated: false,
    nodes: 0,
    maxDepth: MAX_CONDITION_DEPTH - (injected ? 1 : 0),
    maxNodes: MAX_CONDITION_NODES - (injected ? 2 : 0),
    limitNote: injected ? " (the scope predicate the service adds takes the rest)" : "",
    allowScope: options.allowScope ?? false,
    now: options.now ?? new Date(),
  };
  const tree = _validateNode(w, raw, root, options.itemType, 1);
  if (w.truncated) {
    w.issues.push({
      path: root,
      message: `more than ${MAX_CONDITION_ISSUES} issues; only the first ones are listed`,
    });
  }
  if (w.issues.length > 0 || tree === undefined) return { ok: false, issues: w.issues };
  const cost = conditionCost(tree);
  if (options.capPatterns && cost.patterns > MAX_CONDITION_PATTERNS) {
    return {
      ok: false,
      issues: [{
        path: root,
        message: `has ${cost.patterns} matchesRegex patterns; a condition may hold at most ` +
          `${MAX_CONDITION_PATTERNS} (MAX_CONDITION_PATTERNS)`,
      }],
    };
  }
  return { ok: true, condition: normalizeCondition(raw), tree, cost };
}

/** Like {@linkcode validateCondition}, but throws 400 `invalid_condition` naming every issue. */
export function parseCondition(raw: unknown, options: ConditionOptions): ParsedCondition {
  const result = validateCondition(raw, options);
  if (!result.ok) throw invalidCondition(result.issues);
  return { tree: result.tree, json: result.condition, cost: result.cost };
}

/** The `invalid_condition` error naming every issue as "path: message". */
export function invalidCondition(issues: ConditionIssue[]): DomainError {
  return new DomainError(
    "invalid_condition",
    `invalid condition: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`,
  );
}

// The page views pageViewEventCondition selects, with where each keeps the page's path.
const _PAGE_VIEWS: { eventTypeId: string; path: PropertySource }[] = [
  {
    eventTypeId: "view",
    path: { kind: "json", root: "e.target", path: ["properties", "pageInfo", "pagePath"] },
  },
  { eventTypeId: "page_viewed", path: { kind: "json", root: "e.properties", path: ["path"] } },
];

// sessionPropertyCondition fits both: an event's session, or any of a profile's sessions.
const _TYPE_CONTEXT: Record<string, ItemType | undefined> = {
  profilePropertyCondition: "profile",
  pastEventCondition: "profile",
  eventPropertyCondition: "event",
  eventTypeCondition: "event",
  pageViewEventCondition: "event",
};

function _validateNode(
  w: _Walk,
  raw: unknown,
  path: string,
  context: ItemType,
  depth: number,
): ConditionNode | undefined {
  if (depth > w.maxDepth) {
    _issue(w, path, `nested deeper than ${w.maxDepth} levels${w.limitNote}`);
    return;
  }
  w.nodes += 1;
  if (w.nodes > w.maxNodes) {
    if (w.nodes === w.maxNodes + 1) {
      _issue(w, path, `the condition has more than ${w.maxNodes} nodes${w.limitNote}`);
    }
    return;
  }
  if (!isObject(raw)) {
    _issue(w, path, "must be a condition object {type, parameterValues}");
    return;
  }
  let clean = true;
  for (const key of Object.keys(raw)) {
    if (key !== "type" && key !== "parameterValues") {
      _issue(w, _child(path, key), "unknown key (a condition has type and parameterValues)");
      clean = false;
    }
  }
  const typePath = _child(path, "type");
  const pvPath = _child(path, "parameterValues");
  const type = own(raw, "type");
  // As in Unomi, absent parameterValues are empty ones: a type that needs none (matchAllCondition)
  // is complete, and any other names each parameter it lacks.
  const written = own(raw, "parameterValues");
  const params = written === undefined ? {} : written;
  let known = false;
  if (type === undefined) _issue(w, typePath, "is required");
  else if (_string(w, type, typePath)) {
    known = (CONDITION_TYPES as readonly string[]).includes(type);
    const refused = UNOMI_REFUSED_TYPES.get(type);
    if (refused) _issue(w, typePath, `${type} is out of scope: ${refused}`);
    else if (!known) _issue(w, typePath, `unknown condition type ${quote(type)}`);
  }
  if (!isObject(params)) _issue(w, pvPath, "must be an object");
  if (!known || !isObject(params)) return;
  const required = _TYPE_CONTEXT[type as string];
  if (required && required !== context) {
    _issue(
      w,
      typePath,
      context === "profile"
        ? `${type} is not allowed in a profile condition` +
          (type === "pastEventCondition" ? "" : " (use it in pastEventCondition.eventCondition)")
        : type === "pastEventCondition"
        ? "pastEventCondition is only allowed in a profile condition, not inside an event condition"
        : `${type} is not allowed in an event condition`,
    );
    return;
  }
  const node = _validateParams(w, type as string, params, pvPath, context, depth);
  return clean ? node : undefined;
}

function _validateParams(
  w: _Walk,
  type: string,
  params: Record<string, unknown>,
  pvPath: string,
  context: ItemType,
  depth: number,
): ConditionNode | undefined {
  const before = w.problems;
  const valid = () => w.problems === before;
  switch (type) {
    case "booleanCondition": {
      _unknownKeys(w, params, pvPath, ["operator", "subConditions"]);
      const operator = own(params, "operator");
      const operatorPath = _child(pvPath, "operator");
      if (operator === undefined) _issue(w, operatorPath, "is required");
      else if (_string(w, operator, operatorPath) && operator !== "and" && operator !== "or") {
        _issue(w, operatorPath, 'must be "and" or "or"');
      }
      const subs = own(params, "subConditions");
      const subsPath = _child(pvPath, "subConditions");
      const nodes: (ConditionNode | undefined)[] = [];
      if (subs === undefined) _issue(w, subsPath, "is required");
      else if (!Array.isArray(subs) || subs.length === 0) {
        _issue(w, subsPath, "must be a non-empty array of conditions");
      } else {
        subs.forEach((sub, i) =>
          nodes.push(_validateNode(w, sub, _child(subsPath, i), context, depth + 1))
        );
      }
      if (!valid()) return;
      return { type: operator as "and" | "or", subConditions: nodes as ConditionNode[] };
    }
    case "notCondition": {
      _unknownKeys(w, params, pvPath, ["subCondition"]);
      const sub = own(params, "subCondition");
      const subPath = _child(pvPath, "subCondition");
      let node: ConditionNode | undefined;
      if (sub === undefined) _issue(w, subPath, "is required");
      else node = _validateNode(w, sub, subPath, context, depth + 1);
      return valid() && node ? { type: "not", subCondition: node } : undefined;
    }
    case "matchAllCondition":
      _unknownKeys(w, params, pvPath, []);
      return valid() ? { type: "matchAll" } : undefined;
    case "eventTypeCondition": {
      _unknownKeys(w, params, pvPath, ["eventTypeId"]);
      const id = own(params, "eventTypeId");
      const idPath = _child(pvPath, "eventTypeId");
      if (id === undefined) _issue(w, idPath, "is required");
      else if (_string(w, id, idPath) && (id.length === 0 || id.length > 64)) {
        _issue(w, idPath, "must be 1 to 64 characters");
      }
      return valid() ? { type: "eventType", eventTypeId: id as string } : undefined;
    }
    case "pageViewEventCondition": {
      // Unomi's definition: its own page views (eventTypeCondition "view") and, when given, their
      // target.properties.pageInfo.pagePath; here also the catalog's page_viewed (the Segment door,
      // the pixel), whose path is properties.path. A parameter not given drops its part, as
      // Unomi's parameter:: does.
      _unknownKeys(w, params, pvPath, ["pagePath"]);
      const pagePath = own(params, "pagePath");
      if (pagePath !== undefined) _string(w, pagePath, _child(pvPath, "pagePath"));
      if (!valid()) return;
      const views = _PAGE_VIEWS.map(({ eventTypeId, path }): ConditionNode => {
        const type: ConditionNode = { type: "eventType", eventTypeId };
        if (pagePath === undefined) return type;
        return {
          type: "and",
          subConditions: [type, {
            type: "property",
            session: false,
            source: path,
            test: { op: "eq", value: { type: "text", value: pagePath as string } },
            negated: false,
          }],
        };
      });
      return { type: "or", subConditions: views };
    }
    case "pastEventCondition": {
      const node = _validatePastEvents(w, params, pvPath, depth);
      return valid() ? node : undefined;
    }
    case "sessionPropertyCondition": {
      const node = _validateProperty(w, params, pvPath, "session");
      return valid() ? node : undefined;
    }
    default: {
      const node = _validateProperty(w, params, pvPath, context);
      return valid() ? node : undefined;
    }
  }
}

function _validatePastEvents(
  w: _Walk,
  params: Record<string, unknown>,
  pvPath: string,
  depth: number,
): ConditionNode | undefined {
  _unknownKeys(w, params, pvPath, [
    "eventCondition",
    "numberOfDays",
    "fromDate",
    "toDate",
    "minimumEventCount",
    "maximumEventCount",
    "operator",
  ]);
  const ec = own(params, "eventCondition");
  const ecPath = _child(pvPath, "eventCondition");
  let eventCondition: ConditionNode | undefined;
  if (ec === undefined) _issue(w, ecPath, "is required");
  else eventCondition = _validateNode(w, ec, ecPath, "event", depth + 1);

  const days = own(params, "numberOfDays");
  const daysPath = _child(pvPath, "numberOfDays");
  if (days !== undefined) {
    if (
      !Number.isSafeInteger(days) || (days as number) < 1 || (days as number) > MAX_NUMBER_OF_DAYS
    ) {
      _issue(w, daysPath, `must be a JSON integer from 1 to ${MAX_NUMBER_OF_DAYS}${_NO_TEXT}`);
    } else if (own(params, "fromDate") !== undefined || own(params, "toDate") !== undefined) {
      _issue(w, daysPath, "cannot be combined with fromDate or toDate");
    }
  }
  const window: Record<string, Scalar | undefined> = {};
  for (const key of ["fromDate", "toDate"]) {
    const value = own(params, key);
    const path = _child(pvPath, key);
    // Unomi 2.7 reads these as strings (PastEventConditionESQueryBuilder casts to String).
    if (value !== undefined && _string(w, value, path)) {
      window[key] = _checkScalar(w, value, path, "dateExpr", false);
    }
  }
  const operator = own(params, "operator");
  const operatorPath = _child(pvPath, "operator");
  const notOccurred = operator === "eventsNotOccurred";
  if (
    operator !== undefined && _string(w, operator, operatorPath) &&
    operator !== "eventsOccurred" && !notOccurred
  ) {
    _issue(w, operatorPath, 'must be "eventsOccurred" or "eventsNotOccurred"');
  }
  const counts: Record<string, number | undefined> = {};
  for (const key of ["minimumEventCount", "maximumEventCount"]) {
    const value = own(params, key);
    const path = _child(pvPath, key);
    if (value === undefined) continue;
    if (notOccurred) _issue(w, path, "is not used with operator eventsNotOccurred");
    else if (
      !Number.isSafeInteger(value) || (value as number) < 0 || (value as number) > 1_000_000
    ) {
      _issue(w, path, `must be a JSON integer from 0 to 1000000${_NO_TEXT}`);
    } else counts[key] = value as number;
  }
  const min = counts.minimumEventCount ?? 1;
  const max = counts.maximumEventCount;
  if (max !== undefined && max < min) {
    _issue(w, _child(pvPath, "maximumEventCount"), `must be at least minimumEventCount (${min})`);
  }
  if (!eventCondition) return;
  const from = window.fromDate;
  const until = window.toDate;
  return {
    type: "pastEvents",
    eventCondition,
    ...(days === undefined ? {} : { after: w.now.getTime() - (days as number) * DAY }),
    ...(from?.type === "timestamptz" ? { from: from.lo } : {}),
    ...(until?.type === "timestamptz" ? { until: until.hi } : {}),
    min: notOccurred ? 0 : min,
    ...(notOccurred ? { max: 0 } : max === undefined ? {} : { max }),
  };
}

// Unomi 2.7 casts pastEventCondition's counts to Integer: a string there makes the segment invalid
// (itests SegmentIT.testSegmentWithInvalidConditionParameterTypes), unlike a property value.
const _NO_TEXT = " (as in Unomi, a string is not read as a number here)";

function _valueKeys(arity: Arity, kinds: readonly ValueKind[]): string[] {
  const plural = arity === "pair" || arity === "list";
  return VALUE_KEYS.filter((key) => {
    const spec = VALUE_PARAMS.get(key)!;
    return spec.plural === plural && kinds.includes(spec.kind);
  });
}

/** Each operator as the test it makes, and whether it is the negation of that test. */
const _TESTS: Record<string, [PropertyTest["op"], boolean]> = {
  equals: ["eq", false],
  notEquals: ["eq", true],
  greaterThan: ["gt", false],
  greaterThanOrEqualTo: ["gte", false],
  lessThan: ["lt", false],
  lessThanOrEqualTo: ["lte", false],
  between: ["between", false],
  exists: ["exists", false],
  missing: ["exists", true],
  contains: ["contains", false],
  notContains: ["contains", true],
  startsWith: ["startsWith", false],
  endsWith: ["endsWith", false],
  matchesRegex: ["matchesRegex", false],
  in: ["in", false],
  hasSomeOf: ["in", false],
  notIn: ["in", true],
  hasNoneOf: ["in", true],
  all: ["all", false],
  inContains: ["inContains", false],
  isDay: ["isDay", false],
  isNotDay: ["isDay", true],
};

function _validateProperty(
  w: _Walk,
  params: Record<string, unknown>,
  pvPath: string,
  context: PropertyContext,
): ConditionNode | undefined {
  _unknownKeys(w, params, pvPath, ["propertyName", "comparisonOperator", ...VALUE_KEYS]);
  const name = own(params, "propertyName");
  const namePath = _child(pvPath, "propertyName");
  let source: PropertySource | undefined;
  if (name === undefined) _issue(w, namePath, "is required");
  else if (_string(w, name, namePath)) {
    const resolved = resolveProperty(context, name, { allowScope: w.allowScope });
    if (resolved.ok) source = resolved.source;
    else _issue(w, namePath, resolved.message);
  }
  const opName = own(params, "comparisonOperator");
  const opPath = _child(pvPath, "comparisonOperator");
  let op: { arity: Arity; kinds: readonly ValueKind[] } | undefined;
  if (opName === undefined) _issue(w, opPath, "is required");
  else if (_string(w, opName, opPath)) {
    op = OPERATORS.get(opName);
    const refused = UNOMI_REFUSED_OPERATORS.get(opName);
    if (refused) _issue(w, opPath, `comparisonOperator ${opName} is out of scope: ${refused}`);
    else if (!op) _issue(w, opPath, `unknown comparison operator ${quote(opName)}`);
  }
  const sourceKinds = source ? SOURCE_KINDS[source.kind] : ALL_KINDS;
  const usable = op ? op.kinds.filter((k) => sourceKinds.includes(k)) : [];
  if (op && source && op.arity !== "none" && usable.length === 0) {
    _issue(w, opPath, `${opName} does not apply to ${name}, ${SOURCE_TEXT[source.kind]}`);
  }
  const present = VALUE_KEYS.filter((key) => own(params, key) !== undefined);
  const accepted: string[] = [];
  let value: Scalar | Scalar[] | undefined;
  for (const key of present) {
    const spec = VALUE_PARAMS.get(key)!;
    const path = _child(pvPath, key);
    if (op) {
      const plural = op.arity === "pair" || op.arity === "list";
      if (op.arity === "none") {
        _issue(w, path, `is not used by comparisonOperator ${opName}`);
        continue;
      }
      if (spec.plural !== plural || !op.kinds.includes(spec.kind)) {
        _issue(
          w,
          path,
          `is not used by comparisonOperator ${opName} (it takes ${
            _valueKeys(op.arity, op.kinds).join(", ")
          })`,
        );
        continue;
      }
      if (source && !sourceKinds.includes(spec.kind)) {
        const keys = _valueKeys(op.arity, usable);
        _issue(
          w,
          path,
          `does not apply to ${name}, ${SOURCE_TEXT[source.kind]}` +
            (keys.length ? ` (use ${keys.join(" or ")})` : ""),
        );
        continue;
      }
    }
    const parsed = _checkValue(
      w,
      params[key],
      path,
      spec,
      opName === "matchesRegex",
      op?.arity === "pair",
    );
    if (accepted.length === 0) value = parsed;
    accepted.push(key);
  }
  if (op && op.arity !== "none") {
    if (present.length === 0 && usable.length > 0) {
      _issue(
        w,
        pvPath,
        `comparisonOperator ${opName} needs one of ${_valueKeys(op.arity, usable).join(", ")}`,
      );
    }
    for (const key of accepted.slice(1)) {
      _issue(w, _child(pvPath, key), `only one value parameter may be given (${accepted[0]} is)`);
    }
  }
  if (!source || !op) return;
  const [test, negated] = _TESTS[opName as string]!;
  const session = context === "session";
  if (test === "exists") return { type: "property", session, source, test: { op: test }, negated };
  if (value === undefined) return;
  const scalars = Array.isArray(value) ? value : [value];
  const one = scalars[0]!;
  switch (test) {
    case "eq":
    case "gt":
    case "gte":
    case "lt":
    case "lte":
      return { type: "property", session, source, test: { op: test, value: one }, negated };
    case "between":
      return {
        type: "property",
        session,
        source,
        test: { op: test, from: one, to: scalars[1]! },
        negated,
      };
    case "contains":
    case "startsWith":
    case "endsWith":
    case "matchesRegex":
      return {
        type: "property",
        session,
        source,
        test: { op: test, value: (one as { value: string }).value },
        negated,
      };
    case "in":
    case "all":
      return {
        type: "property",
        session,
        source,
        test: { op: test, values: _list(scalars) },
        negated,
      };
    case "inContains":
      return {
        type: "property",
        session,
        source,
        test: { op: test, values: scalars.map((s) => (s as { value: string }).value) },
        negated,
      };
    case "isDay":
      return {
        type: "property",
        session,
        source,
        test: { op: test, value: one as Extract<Scalar, { type: "timestamptz" }> },
        negated,
      };
  }
}

/** Parsed values of one kind (a list parameter holds one kind) as one typed list. */
function _list(scalars: Scalar[]): ScalarList {
  const first = scalars[0]!;
  if (first.type === "text") {
    return { type: "text", values: scalars.map((s) => (s as { value: string }).value) };
  }
  if (first.type === "numeric") {
    return { type: "numeric", values: scalars.map((s) => (s as { value: number }).value) };
  }
  return {
    type: "timestamptz",
    spans: scalars.map((s) => {
      const span = s as Extract<Scalar, { type: "timestamptz" }>;
      return [span.lo, span.hi];
    }),
  };
}

function _checkValue(
  w: _Walk,
  value: unknown,
  path: string,
  spec: { kind: ValueKind; plural: boolean },
  regex: boolean,
  pair: boolean,
): Scalar | Scalar[] | undefined {
  if (!spec.plural) return _checkScalar(w, value, path, spec.kind, regex);
  if (!Array.isArray(value) || value.length === 0) {
    _issue(w, path, `must be a non-empty array, each value ${KIND_TEXT[spec.kind]}`);
  } else if (value.length > MAX_CONDITION_VALUES) {
    _issue(w, path, `must have at most ${MAX_CONDITION_VALUES} items`);
  } else {
    if (pair && value.length !== 2) _issue(w, path, "between takes exactly two values [from, to]");
    const items = value.map((item, i) => _checkScalar(w, item, _child(path, i), spec.kind, false));
    return items.every((item) => item !== undefined) ? items as Scalar[] : undefined;
  }
  return undefined;
}

function _checkScalar(
  w: _Walk,
  value: unknown,
  path: string,
  kind: ValueKind,
  regex: boolean,
): Scalar | undefined {
  switch (kind) {
    case "string": {
      if (!_string(w, value, path)) return;
      const problem = regex ? regexProblem(value) : null;
      if (problem) {
        _issue(w, path, problem);
        return;
      }
      return { type: "text", value };
    }
    case "integer":
    case "double": {
      const n = kind === "integer" ? integerValue(value) : numberValue(value);
      if (n === undefined) {
        _issue(w, path, `must be ${KIND_TEXT[kind]}`);
        return;
      }
      return { type: "numeric", value: n };
    }
    case "date":
    case "dateExpr": {
      const text = dateText(value);
      if (text === undefined) {
        _issue(w, path, `must be ${KIND_TEXT[kind]}`);
        return;
      }
      if (!_string(w, text, path)) return;
      const span = spanOf(kind, text, w.now);
      if (span === null) {
        _issue(
          w,
          path,
          `must be ${
            KIND_TEXT[kind]
          }, within the years 1 to 9999 (UTC, after its offset and date math)`,
        );
        return;
      }
      return { type: "timestamptz", lo: span[0], hi: span[1] };
    }
  }
}
