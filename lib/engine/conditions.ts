/**
 * The condition language: Apache Unomi 2.x condition trees, validated against the public
 * allowlist and compiled to parameterized SQL over the engine's tables (`profiles p`, `events e`).
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
 */
import type postgres from "postgres";
import type { Sql } from "../db.ts";
import { HttpError } from "../errors.ts";

/** What a condition selects. */
export type ItemType = "profile" | "event";

/** A Unomi condition node. */
export interface Condition {
  type: string;
  parameterValues: Record<string, unknown>;
}

/** One problem in a condition, located by JSON path. */
export interface ConditionIssue {
  path: string;
  message: string;
}

/** Options of {@linkcode validateCondition} and {@linkcode parseCondition}. */
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
}

/** The outcome of {@linkcode validateCondition}. */
export type ConditionValidation =
  | { ok: true; condition: Condition }
  | { ok: false; issues: ConditionIssue[] };

/** A postgres.js fragment: interpolate it in a sql`...` query, never await it on its own. */
export type SqlFragment = postgres.PendingQuery<postgres.Row[]>;

export const MAX_CONDITION_DEPTH = 10;
export const MAX_CONDITION_NODES = 200;
export const MAX_CONDITION_VALUES = 1000;
export const MAX_REGEX_LENGTH = 200;
/** Issues listed at most; one more says that the list was cut. */
export const MAX_CONDITION_ISSUES = 100;
export const MAX_NUMBER_OF_DAYS = 36_500;

/** The public condition types. */
export const CONDITION_TYPES = [
  "booleanCondition",
  "notCondition",
  "matchAllCondition",
  "profilePropertyCondition",
  "eventPropertyCondition",
  "eventTypeCondition",
  "pastEventCondition",
] as const;

type _Arity = "none" | "single" | "pair" | "list";
type _ValueKind = "string" | "integer" | "double" | "date" | "dateExpr";

const _ALL_KINDS: readonly _ValueKind[] = ["string", "integer", "double", "date", "dateExpr"];

const _OPERATORS = new Map<string, { arity: _Arity; kinds: readonly _ValueKind[] }>([
  ["equals", { arity: "single", kinds: _ALL_KINDS }],
  ["notEquals", { arity: "single", kinds: _ALL_KINDS }],
  ["greaterThan", { arity: "single", kinds: _ALL_KINDS }],
  ["greaterThanOrEqualTo", { arity: "single", kinds: _ALL_KINDS }],
  ["lessThan", { arity: "single", kinds: _ALL_KINDS }],
  ["lessThanOrEqualTo", { arity: "single", kinds: _ALL_KINDS }],
  ["between", { arity: "pair", kinds: _ALL_KINDS }],
  ["exists", { arity: "none", kinds: [] }],
  ["missing", { arity: "none", kinds: [] }],
  ["contains", { arity: "single", kinds: ["string"] }],
  ["notContains", { arity: "single", kinds: ["string"] }],
  ["startsWith", { arity: "single", kinds: ["string"] }],
  ["endsWith", { arity: "single", kinds: ["string"] }],
  ["matchesRegex", { arity: "single", kinds: ["string"] }],
  ["in", { arity: "list", kinds: _ALL_KINDS }],
  ["notIn", { arity: "list", kinds: _ALL_KINDS }],
  ["all", { arity: "list", kinds: _ALL_KINDS }],
  ["inContains", { arity: "list", kinds: ["string"] }],
  ["hasSomeOf", { arity: "list", kinds: _ALL_KINDS }],
  ["hasNoneOf", { arity: "list", kinds: _ALL_KINDS }],
  ["isDay", { arity: "single", kinds: ["date", "dateExpr"] }],
  ["isNotDay", { arity: "single", kinds: ["date", "dateExpr"] }],
]);

/** The public comparison operators (Unomi 2.7 without `distance`). */
export const COMPARISON_OPERATORS: readonly string[] = [..._OPERATORS.keys()];

const _VALUE_PARAMS = new Map<string, { kind: _ValueKind; plural: boolean }>([
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
const _VALUE_KEYS = [..._VALUE_PARAMS.keys()];

const _KIND_TEXT: Record<_ValueKind, string> = {
  string: "a string",
  integer: "an integer",
  double: "a number",
  date: "an ISO 8601 date-time (e.g. 2026-01-31T12:00:00Z)",
  dateExpr: "a date math expression (e.g. now-30d, now/d, 2026-01-01T00:00:00Z||+1M)",
};

// ---------------------------------------------------------------------------------------------
// Properties

type _Column =
  | "p.item_id"
  | "p.scope"
  | "p.first_visit"
  | "p.last_visit"
  | "p.nb_of_visits"
  | "e.id"
  | "e.scope"
  | "e.event_type"
  | "e.profile_id"
  | "e.session_id"
  | "e.time_stamp";

type _JsonRoot = "p.properties" | "e.properties" | "e.flattened_properties" | "e.target";

/** Where a property lives: a fixed column or a path under a fixed jsonb column. */
export type PropertySource =
  | { kind: "json"; root: _JsonRoot; path: string[] }
  | { kind: "text" | "timestamptz" | "integer"; column: _Column };

const _SOURCE_KINDS: Record<PropertySource["kind"], readonly _ValueKind[]> = {
  json: _ALL_KINDS,
  text: ["string"],
  timestamptz: ["date", "dateExpr"],
  integer: ["integer", "double"],
};

const _SOURCE_TEXT: Record<PropertySource["kind"], string> = {
  json: "a property",
  text: "a text field",
  timestamptz: "a date field",
  integer: "a number field",
};

const _PROFILE_FIELDS = new Map<string, PropertySource>([
  ["itemId", { kind: "text", column: "p.item_id" }],
  ["properties.firstVisit", { kind: "timestamptz", column: "p.first_visit" }],
  ["properties.lastVisit", { kind: "timestamptz", column: "p.last_visit" }],
  ["properties.nbOfVisits", { kind: "integer", column: "p.nb_of_visits" }],
]);

const _EVENT_FIELDS = new Map<string, PropertySource>([
  ["itemId", { kind: "text", column: "e.id" }],
  ["eventType", { kind: "text", column: "e.event_type" }],
  ["profileId", { kind: "text", column: "e.profile_id" }],
  ["sessionId", { kind: "text", column: "e.session_id" }],
  ["timeStamp", { kind: "timestamptz", column: "e.time_stamp" }],
  ["target.itemId", { kind: "json", root: "e.target", path: ["itemId"] }],
  ["target.itemType", { kind: "json", root: "e.target", path: ["itemType"] }],
]);

const _SEGMENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const _SCOPE_SEGMENTS = new Set(["scope", "shopDomain"]);
const _SCOPE_PROPERTY_NAMES = new Set([
  "properties.shopDomain",
  "properties.scope",
  "scope",
  "shopDomain",
]);

/**
 * Resolves a property name of a profile or event condition against the allowlist: profile
 * `properties.<seg>(.<seg>){0,4}` and `itemId` (firstVisit, lastVisit and nbOfVisits are
 * columns); event `properties.*`, `flattenedProperties.*`, `timeStamp`, `eventType`,
 * `profileId`, `sessionId`, `itemId`, `target.itemId`, `target.itemType`. Any segment named
 * `scope` or `shopDomain` is refused unless `allowScope`.
 */
export function resolveProperty(
  itemType: ItemType,
  name: string,
  options: { allowScope?: boolean } = {},
): { ok: true; source: PropertySource } | { ok: false; message: string } {
  const segments = name.split(".");
  if (!options.allowScope && segments.some((s) => _SCOPE_SEGMENTS.has(s))) {
    return {
      ok: false,
      message: "must not reference scope or shopDomain: the scope is bound server-side",
    };
  }
  if (segments[0] === "systemProperties") {
    return { ok: false, message: "systemProperties are not addressable" };
  }
  const fixed = (itemType === "profile" ? _PROFILE_FIELDS : _EVENT_FIELDS).get(name);
  if (fixed) return { ok: true, source: fixed };
  // Every profile carries properties.shopDomain = its scope (the engine alone writes it), so the
  // injected scope predicate reads the indexed column instead.
  if (
    options.allowScope &&
    (name === "scope" || name === "shopDomain" ||
      (itemType === "profile" && name === "properties.shopDomain"))
  ) {
    return {
      ok: true,
      source: { kind: "text", column: itemType === "profile" ? "p.scope" : "e.scope" },
    };
  }
  const root: _JsonRoot | undefined = itemType === "profile"
    ? (segments[0] === "properties" ? "p.properties" : undefined)
    : segments[0] === "properties"
    ? "e.properties"
    : segments[0] === "flattenedProperties"
    ? "e.flattened_properties"
    : undefined;
  const path = segments.slice(1);
  if (root && path.length >= 1 && path.length <= 5 && path.every((s) => _SEGMENT.test(s))) {
    return { ok: true, source: { kind: "json", root, path } };
  }
  return {
    ok: false,
    message: itemType === "profile"
      ? `unknown profile property ${_quote(name)} (allowed: properties.<name> with up to 5 ` +
        "dot-separated segments of letters, digits and _, and itemId)"
      : `unknown event property ${_quote(name)} (allowed: properties.<name>, ` +
        "flattenedProperties.<name>, timeStamp, eventType, profileId, sessionId, itemId, " +
        "target.itemId, target.itemType)",
  };
}

// ---------------------------------------------------------------------------------------------
// Dates

const _SECOND = 1000;
const _MINUTE = 60 * _SECOND;
const _HOUR = 60 * _MINUTE;
const _DAY = 24 * _HOUR;
const _MAX_TIME = 8.64e15;

// The same grammar as cdp_try_timestamptz (migration 4): a date, optionally a time with minutes,
// seconds and a fraction, optionally an offset; no offset means UTC.
const _ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|([+-])(\d{2})(?::?(\d{2}))?)?)?$/;

function _daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Parses an ISO 8601 date-time to epoch ms (fraction truncated to ms) and its precision. */
function _parseIso(text: string): { ms: number; unit: number } | null {
  if (text.length > 40) return null;
  const m = _ISO.exec(text);
  if (!m) return null;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [h, mi, s] = [Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0)];
  const ms = m[7] ? Number(m[7].padEnd(3, "0").slice(0, 3)) : 0;
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > _daysInMonth(y, mo)) return null;
  if (h > 23 || mi > 59 || s > 59) return null;
  let offset = 0;
  if (m[9]) {
    const [oh, om] = [Number(m[10]), Number(m[11] ?? 0)];
    if (oh > 23 || om > 59) return null;
    offset = (m[9] === "-" ? -1 : 1) * (oh * 60 + om) * _MINUTE;
  }
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, ms);
  const unit = m[4] === undefined ? _DAY : m[6] === undefined ? _MINUTE : m[7] ? 1 : _SECOND;
  return { ms: date.getTime() - offset, unit };
}

function _addMonths(t: number, months: number): number {
  const date = new Date(t);
  if (Number.isNaN(date.getTime())) return NaN;
  const total = date.getUTCFullYear() * 12 + date.getUTCMonth() + months;
  const year = Math.floor(total / 12);
  if (!Number.isFinite(total) || Math.abs(year) > 270_000) return NaN;
  const month = total - year * 12;
  // Like Java time (and Elasticsearch): Jan 31 + 1M is the last day of February.
  const day = Math.min(date.getUTCDate(), _daysInMonth(year, month + 1));
  date.setUTCFullYear(year, month, day);
  return date.getTime();
}

function _addUnit(t: number, amount: number, unit: string): number {
  switch (unit) {
    case "y":
      return _addMonths(t, amount * 12);
    case "M":
      return _addMonths(t, amount);
    case "w":
      return t + amount * 7 * _DAY;
    case "d":
      return t + amount * _DAY;
    case "h":
    case "H":
      return t + amount * _HOUR;
    case "m":
      return t + amount * _MINUTE;
    default:
      return t + amount * _SECOND;
  }
}

function _floorUnit(t: number, unit: string): number {
  const mod = (size: number) => t - (((t % size) + size) % size);
  switch (unit) {
    case "y":
    case "M": {
      const date = new Date(t);
      const floored = new Date(0);
      floored.setUTCFullYear(date.getUTCFullYear(), unit === "y" ? 0 : date.getUTCMonth(), 1);
      return floored.getTime();
    }
    case "w": {
      const day = mod(_DAY);
      return day - ((new Date(day).getUTCDay() + 6) % 7) * _DAY; // weeks start on Monday
    }
    case "d":
      return mod(_DAY);
    case "h":
    case "H":
      return mod(_HOUR);
    case "m":
      return mod(_MINUTE);
    default:
      return mod(_SECOND);
  }
}

const _MATH_OP = /^(?:([+-])(\d{1,9})([yMwdhHms])|\/([yMwdhHms]))/;

/**
 * Elasticsearch date math to epoch ms. With `roundUp` (how Elasticsearch reads the upper end of
 * a range), a rounding or a partial ISO date yields the LAST millisecond of its unit.
 */
function _dateMath(expr: string, now: Date, roundUp: boolean): number | null {
  if (expr.length > 100) return null;
  let t: number;
  let rest: string;
  if (expr.startsWith("now")) {
    t = now.getTime();
    rest = expr.slice(3);
  } else {
    const bar = expr.indexOf("||");
    const anchor = _parseIso(bar < 0 ? expr : expr.slice(0, bar));
    if (!anchor) return null;
    t = roundUp ? anchor.ms + anchor.unit - 1 : anchor.ms;
    rest = bar < 0 ? "" : expr.slice(bar + 2);
  }
  for (let ops = 0; rest.length > 0; ops++) {
    const m = _MATH_OP.exec(rest);
    if (!m || ops >= 10) return null;
    rest = rest.slice(m[0].length);
    if (m[4]) {
      t = _floorUnit(t, m[4]);
      if (roundUp) t = _addUnit(t, 1, m[4]) - 1;
    } else {
      t = _addUnit(t, (m[1] === "-" ? -1 : 1) * Number(m[2]), m[3]!);
    }
    if (!Number.isFinite(t) || Math.abs(t) > _MAX_TIME) return null;
  }
  if (!Number.isFinite(t)) return null;
  const year = new Date(t).getUTCFullYear();
  return year >= 1 && year <= 9999 ? t : null;
}

/**
 * Resolves Unomi/Elasticsearch date math: `now` or an ISO 8601 anchor followed by `||`, then any
 * of `+<n><unit>`, `-<n><unit>`, `/<unit>` (units y M w d h H m s; rounding floors in UTC, weeks
 * start on Monday; adding months clamps the day like Java). A plain ISO 8601 date-time is valid
 * too. With `roundUp` (the upper end of a range) rounding and partial dates give the last
 * millisecond of their unit instead. Returns null when invalid or outside years 1 to 9999.
 */
export function resolveDateExpr(
  expr: string,
  now: Date,
  options: { roundUp?: boolean } = {},
): Date | null {
  if (typeof expr !== "string") return null;
  const t = _dateMath(expr, now, options.roundUp ?? false);
  return t === null ? null : new Date(t);
}

/** A date value as the span [lo, hi) it stands for (Elasticsearch reads ranges this way). */
function _dateSpan(kind: "date" | "dateExpr", value: string, now: Date): [Date, Date] {
  let lo: number | null;
  let hi: number | null;
  if (kind === "date") {
    const parsed = _parseIso(value);
    lo = parsed?.ms ?? null;
    hi = parsed ? parsed.ms + parsed.unit : null;
  } else {
    lo = _dateMath(value, now, false);
    const last = _dateMath(value, now, true);
    hi = last === null ? null : last + 1;
  }
  if (lo === null || hi === null) {
    throw new HttpError(
      400,
      "invalid_condition",
      `the date ${_quote(value)} resolves outside the years 1 to 9999`,
    );
  }
  return [new Date(lo), new Date(hi)];
}

// ---------------------------------------------------------------------------------------------
// Regular expressions

/**
 * Checks a matchesRegex pattern: it must compile as a JavaScript RegExp AND mean the same in
 * Postgres (ARE), so only the common subset is accepted: no backreferences, named groups,
 * \b \B \x \u \p escapes, POSIX bracket classes, class escapes in ranges, quantified lookarounds,
 * repetition counts over 255 or expansions Postgres would find too complex.
 */
function _regexProblem(pattern: string): string | null {
  if (pattern.length > MAX_REGEX_LENGTH) return `must be at most ${MAX_REGEX_LENGTH} characters`;
  try {
    new RegExp(pattern);
  } catch {
    return "is not a valid regular expression";
  }
  const stack = [{ weight: 0, lookaround: false }];
  let last = 0;
  let previous: "none" | "atom" | "lookaround" | "quantified" | "anchor" = "none";
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    const top = stack[stack.length - 1]!;
    if (c === "\\") {
      const escaped = pattern[i + 1] ?? "";
      if (/[A-Za-z0-9]/.test(escaped) && !"dDsSwWnrtfv".includes(escaped)) {
        return `uses the unsupported escape \\${escaped}`;
      }
      i += 2;
      [top.weight, last, previous] = [top.weight + 1, 1, "atom"];
    } else if (c === "[") {
      const end = _classEnd(pattern, i);
      if (typeof end === "string") return end;
      i = end;
      [top.weight, last, previous] = [top.weight + 1, 1, "atom"];
    } else if (c === "(") {
      let lookaround = false;
      if (pattern[i + 1] === "?") {
        const kind = pattern.slice(i + 2, i + 4);
        if (kind.startsWith(":")) i += 3;
        else if (kind.startsWith("=") || kind.startsWith("!")) [lookaround, i] = [true, i + 3];
        else if (kind === "<=" || kind === "<!") [lookaround, i] = [true, i + 4];
        else {return "uses an unsupported group: only (...), (?:...), (?=...), (?!...), (?<=...) and (?<!...) are allowed";}
      } else {
        i += 1;
      }
      stack.push({ weight: 0, lookaround });
      previous = "none";
    } else if (c === ")") {
      const group = stack.pop()!;
      stack[stack.length - 1]!.weight += group.weight;
      [last, previous] = [group.weight, group.lookaround ? "lookaround" : "atom"];
      i += 1;
    } else if (c === "*" || c === "+" || c === "?" || c === "{") {
      let copies = 1;
      if (c === "{") {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i));
        if (!m) {
          return "has a literal { that must be escaped as \\{";
        }
        const low = Number(m[1]);
        const high = m[3] ? Number(m[3]) : m[2] !== undefined ? low + 1 : low;
        if (low > 255 || (m[3] && Number(m[3]) > 255)) {
          return "has a repetition count over 255";
        }
        copies = Math.max(high, 1);
        i += m[0].length;
      } else {
        i += 1;
      }
      if (
        previous !== "atom"
      ) {
        return "has a quantifier that does not follow a character, class or group";
      }
      if (pattern[i] === "?") {
        i += 1;
      }
      top.weight += last * (copies - 1);
      previous = "quantified";
    } else if (c === "^" || c === "$") {
      previous = "anchor";
      i += 1;
    } else if (c === "|") {
      previous = "none";
      i += 1;
    } else {
      [top.weight, last, previous] = [top.weight + 1, 1, "atom"];
      i += 1;
    }
  }
  if (stack[0]!.weight > 10_000) return "is too complex (its repetitions expand past 10000 items)";
  return null;
}

/** The index after the class starting at `start`, or a problem. */
function _classEnd(pattern: string, start: number): number | string {
  let j = start + 1;
  if (pattern[j] === "^") j += 1;
  if (pattern[j] === "]") return "has a class starting with ] (escape it as \\])";
  let previous: "none" | "char" | "class" | "range" = "none";
  // One class item at k: its kind and where it ends, or a problem.
  const item = (k: number): { kind: "char" | "class"; end: number } | string => {
    const c = pattern[k] ?? "";
    if (c === "[" && ":.=".includes(pattern[k + 1] ?? "-")) {
      return "uses a POSIX bracket expression ([:name:], [.x.] or [=x=]), which is not supported";
    }
    if (c !== "\\") return { kind: "char", end: k + 1 };
    const escaped = pattern[k + 1] ?? "";
    if (!/[A-Za-z0-9]/.test(escaped)) return { kind: "char", end: k + 2 };
    if ("dDsSwW".includes(escaped)) return { kind: "class", end: k + 2 };
    if ("nrtfv".includes(escaped)) return { kind: "char", end: k + 2 };
    return `uses the unsupported escape \\${escaped}`;
  };
  while (j < pattern.length && pattern[j] !== "]") {
    if (pattern[j] === "-" && previous !== "none" && pattern[j + 1] !== "]") {
      const next = item(j + 1);
      if (typeof next === "string") return next;
      if (previous !== "char" || next.kind !== "char") {
        return "has a class range that does not join two single characters (put a literal - first or last)";
      }
      [j, previous] = [next.end, "range"];
      continue;
    }
    const current = item(j);
    if (typeof current === "string") return current;
    [j, previous] = [current.end, current.kind];
  }
  return j + 1;
}

// ---------------------------------------------------------------------------------------------
// Validation

interface _Walk {
  issues: ConditionIssue[];
  truncated: boolean;
  nodes: number;
  maxDepth: number;
  maxNodes: number;
  /** Appended to a limit's message when the scope predicate takes part of it. */
  limitNote: string;
  allowScope: boolean;
  now: Date;
}

function _isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function _own(object: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

function _child(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)
    ? `${path}.${key}`
    : `${path}[${JSON.stringify(key.length > 100 ? `${key.slice(0, 100)}...` : key)}]`;
}

function _quote(value: string): string {
  return JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}...` : value);
}

function _issue(w: _Walk, path: string, message: string): void {
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
    _issue(w, path, "script and parameter resolvers are not allowed");
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
 * Validates an untrusted tree against the public allowlist and reports every problem by JSON
 * path. `allowScope` false (the default) rejects any property name with a `scope` or
 * `shopDomain` segment.
 */
export function validateCondition(raw: unknown, options: ConditionOptions): ConditionValidation {
  const root = options.root ?? "$";
  const injected = options.scopeInjected ?? false;
  const w: _Walk = {
    issues: [],
    truncated: false,
    nodes: 0,
    maxDepth: MAX_CONDITION_DEPTH - (injected ? 1 : 0),
    maxNodes: MAX_CONDITION_NODES - (injected ? 2 : 0),
    limitNote: injected ? " (the scope predicate the service adds takes the rest)" : "",
    allowScope: options.allowScope ?? false,
    now: new Date(),
  };
  _validateNode(w, raw, root, options.itemType, 1);
  if (w.truncated) {
    w.issues.push({
      path: root,
      message: `more than ${MAX_CONDITION_ISSUES} issues; only the first ones are listed`,
    });
  }
  if (w.issues.length > 0) return { ok: false, issues: w.issues };
  return { ok: true, condition: structuredClone(raw) as Condition };
}

/** Like {@linkcode validateCondition}, but throws 400 `invalid_condition` naming every issue. */
export function parseCondition(raw: unknown, options: ConditionOptions): Condition {
  const result = validateCondition(raw, options);
  if (!result.ok) throw _invalid(result.issues);
  return result.condition;
}

function _invalid(issues: ConditionIssue[]): HttpError {
  return new HttpError(
    400,
    "invalid_condition",
    `invalid condition: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`,
  );
}

const _TYPE_CONTEXT: Record<string, ItemType | undefined> = {
  profilePropertyCondition: "profile",
  pastEventCondition: "profile",
  eventPropertyCondition: "event",
  eventTypeCondition: "event",
};

function _validateNode(w: _Walk, raw: unknown, path: string, context: ItemType, depth: number) {
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
  if (!_isObject(raw)) {
    _issue(w, path, "must be a condition object {type, parameterValues}");
    return;
  }
  for (const key of Object.keys(raw)) {
    if (key !== "type" && key !== "parameterValues") {
      _issue(w, _child(path, key), "unknown key (a condition has type and parameterValues)");
    }
  }
  const typePath = _child(path, "type");
  const pvPath = _child(path, "parameterValues");
  const type = _own(raw, "type");
  const params = _own(raw, "parameterValues");
  let known = false;
  if (type === undefined) _issue(w, typePath, "is required");
  else if (_string(w, type, typePath)) {
    known = (CONDITION_TYPES as readonly string[]).includes(type);
    if (!known) _issue(w, typePath, `unknown condition type ${_quote(type)}`);
  }
  if (params === undefined) _issue(w, pvPath, "is required");
  else if (!_isObject(params)) _issue(w, pvPath, "must be an object");
  if (!known || !_isObject(params)) return;
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
  switch (type) {
    case "booleanCondition": {
      _unknownKeys(w, params, pvPath, ["operator", "subConditions"]);
      const operator = _own(params, "operator");
      const operatorPath = _child(pvPath, "operator");
      if (operator === undefined) _issue(w, operatorPath, "is required");
      else if (_string(w, operator, operatorPath) && operator !== "and" && operator !== "or") {
        _issue(w, operatorPath, 'must be "and" or "or"');
      }
      const subs = _own(params, "subConditions");
      const subsPath = _child(pvPath, "subConditions");
      if (subs === undefined) _issue(w, subsPath, "is required");
      else if (!Array.isArray(subs) || subs.length === 0) {
        _issue(w, subsPath, "must be a non-empty array of conditions");
      } else {
        subs.forEach((sub, i) => _validateNode(w, sub, _child(subsPath, i), context, depth + 1));
      }
      return;
    }
    case "notCondition": {
      _unknownKeys(w, params, pvPath, ["subCondition"]);
      const sub = _own(params, "subCondition");
      const subPath = _child(pvPath, "subCondition");
      if (sub === undefined) _issue(w, subPath, "is required");
      else _validateNode(w, sub, subPath, context, depth + 1);
      return;
    }
    case "matchAllCondition":
      _unknownKeys(w, params, pvPath, []);
      return;
    case "eventTypeCondition": {
      _unknownKeys(w, params, pvPath, ["eventTypeId"]);
      const id = _own(params, "eventTypeId");
      const idPath = _child(pvPath, "eventTypeId");
      if (id === undefined) _issue(w, idPath, "is required");
      else if (_string(w, id, idPath) && (id.length === 0 || id.length > 64)) {
        _issue(w, idPath, "must be 1 to 64 characters");
      }
      return;
    }
    case "pastEventCondition":
      _validatePastEvents(w, params, pvPath, depth);
      return;
    default:
      _validateProperty(w, params, pvPath, context);
  }
}

function _validatePastEvents(
  w: _Walk,
  params: Record<string, unknown>,
  pvPath: string,
  depth: number,
): void {
  _unknownKeys(w, params, pvPath, [
    "eventCondition",
    "numberOfDays",
    "fromDate",
    "toDate",
    "minimumEventCount",
    "maximumEventCount",
    "operator",
  ]);
  const ec = _own(params, "eventCondition");
  const ecPath = _child(pvPath, "eventCondition");
  if (ec === undefined) _issue(w, ecPath, "is required");
  else _validateNode(w, ec, ecPath, "event", depth + 1);

  const days = _own(params, "numberOfDays");
  const daysPath = _child(pvPath, "numberOfDays");
  if (days !== undefined) {
    if (
      !Number.isSafeInteger(days) || (days as number) < 1 || (days as number) > MAX_NUMBER_OF_DAYS
    ) {
      _issue(w, daysPath, `must be an integer from 1 to ${MAX_NUMBER_OF_DAYS}`);
    } else if (_own(params, "fromDate") !== undefined || _own(params, "toDate") !== undefined) {
      _issue(w, daysPath, "cannot be combined with fromDate or toDate");
    }
  }
  for (const key of ["fromDate", "toDate"]) {
    const value = _own(params, key);
    const path = _child(pvPath, key);
    if (value !== undefined && _string(w, value, path) && !_validDateExpr(value, w.now)) {
      _issue(w, path, `must be ${_KIND_TEXT.date} or ${_KIND_TEXT.dateExpr}`);
    }
  }
  const operator = _own(params, "operator");
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
    const value = _own(params, key);
    const path = _child(pvPath, key);
    if (value === undefined) continue;
    if (notOccurred) _issue(w, path, "is not used with operator eventsNotOccurred");
    else if (
      !Number.isSafeInteger(value) || (value as number) < 0 || (value as number) > 1_000_000
    ) {
      _issue(w, path, "must be an integer from 0 to 1000000");
    } else counts[key] = value as number;
  }
  const min = counts.minimumEventCount ?? 1;
  const max = counts.maximumEventCount;
  if (max !== undefined && max < min) {
    _issue(w, _child(pvPath, "maximumEventCount"), `must be at least minimumEventCount (${min})`);
  }
}

function _validDateExpr(value: string, now: Date): boolean {
  return _dateMath(value, now, false) !== null && _dateMath(value, now, true) !== null;
}

function _valueKeys(arity: _Arity, kinds: readonly _ValueKind[]): string[] {
  const plural = arity === "pair" || arity === "list";
  return _VALUE_KEYS.filter((key) => {
    const spec = _VALUE_PARAMS.get(key)!;
    return spec.plural === plural && kinds.includes(spec.kind);
  });
}

function _validateProperty(
  w: _Walk,
  params: Record<string, unknown>,
  pvPath: string,
  context: ItemType,
): void {
  _unknownKeys(w, params, pvPath, ["propertyName", "comparisonOperator", ..._VALUE_KEYS]);
  const name = _own(params, "propertyName");
  const namePath = _child(pvPath, "propertyName");
  let source: PropertySource | undefined;
  if (name === undefined) _issue(w, namePath, "is required");
  else if (_string(w, name, namePath)) {
    const resolved = resolveProperty(context, name, { allowScope: w.allowScope });
    if (resolved.ok) source = resolved.source;
    else _issue(w, namePath, resolved.message);
  }
  const opName = _own(params, "comparisonOperator");
  const opPath = _child(pvPath, "comparisonOperator");
  let op: { arity: _Arity; kinds: readonly _ValueKind[] } | undefined;
  if (opName === undefined) _issue(w, opPath, "is required");
  else if (_string(w, opName, opPath)) {
    op = _OPERATORS.get(opName);
    if (!op) _issue(w, opPath, `unknown comparison operator ${_quote(opName)}`);
  }
  const sourceKinds = source ? _SOURCE_KINDS[source.kind] : _ALL_KINDS;
  const usable = op ? op.kinds.filter((k) => sourceKinds.includes(k)) : [];
  if (op && source && op.arity !== "none" && usable.length === 0) {
    _issue(w, opPath, `${opName} does not apply to ${name}, ${_SOURCE_TEXT[source.kind]}`);
  }
  const present = _VALUE_KEYS.filter((key) => _own(params, key) !== undefined);
  const accepted: string[] = [];
  for (const key of present) {
    const spec = _VALUE_PARAMS.get(key)!;
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
          `does not apply to ${name}, ${_SOURCE_TEXT[source.kind]}` +
            (keys.length ? ` (use ${keys.join(" or ")})` : ""),
        );
        continue;
      }
    }
    _checkValue(w, params[key], path, spec, opName === "matchesRegex", op?.arity === "pair");
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
}

function _checkValue(
  w: _Walk,
  value: unknown,
  path: string,
  spec: { kind: _ValueKind; plural: boolean },
  regex: boolean,
  pair: boolean,
): void {
  if (!spec.plural) {
    _checkScalar(w, value, path, spec.kind, regex);
    return;
  }
  if (!Array.isArray(value) || value.length === 0) {
    _issue(w, path, `must be a non-empty array of ${_KIND_TEXT[spec.kind].replace(/^an? /, "")}s`);
  } else if (value.length > MAX_CONDITION_VALUES) {
    _issue(w, path, `must have at most ${MAX_CONDITION_VALUES} items`);
  } else {
    if (pair && value.length !== 2) _issue(w, path, "between takes exactly two values [from, to]");
    value.forEach((item, i) => _checkScalar(w, item, _child(path, i), spec.kind, false));
  }
}

function _checkScalar(w: _Walk, value: unknown, path: string, kind: _ValueKind, regex: boolean) {
  switch (kind) {
    case "string": {
      if (!_string(w, value, path)) return;
      const problem = regex ? _regexProblem(value) : null;
      if (problem) _issue(w, path, problem);
      return;
    }
    case "integer":
      if (!Number.isSafeInteger(value)) _issue(w, path, `must be ${_KIND_TEXT.integer}`);
      return;
    case "double":
      if (typeof value !== "number" || !Number.isFinite(value)) {
        _issue(w, path, `must be ${_KIND_TEXT.double}`);
      }
      return;
    case "date":
      if (_string(w, value, path) && !_parseIso(value)) {
        _issue(w, path, `must be ${_KIND_TEXT.date}`);
      }
      return;
    case "dateExpr":
      if (_string(w, value, path) && !_validDateExpr(value, w.now)) {
        _issue(w, path, `must be ${_KIND_TEXT.dateExpr}`);
      }
  }
}

// ---------------------------------------------------------------------------------------------
// Scope predicates

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
  const type = _own(node, "type");
  if (type !== "profilePropertyCondition" && type !== "eventPropertyCondition") return false;
  const params = _own(node, "parameterValues");
  if (!_isObject(params)) return false;
  const name = _own(params, "propertyName");
  return typeof name === "string" && _SCOPE_PROPERTY_NAMES.has(name);
}

/**
 * Removes every scope predicate (a profile or event property condition on properties.shopDomain,
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
  if (depth > 64 || !_isObject(node)) return node;
  if (_isScopePredicate(node)) return null;
  const params = _own(node, "parameterValues");
  if (!_isObject(params)) return node;
  const type = _own(node, "type");
  if (type === "booleanCondition") {
    const subs = _own(params, "subConditions");
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

// ---------------------------------------------------------------------------------------------
// Compilation

/** Options of {@linkcode compileCondition}. */
export interface CompileOptions {
  itemType: ItemType;
  /** Anchors date math. */
  now: Date;
  /** The scope the enclosing query filters on (`p.scope = scope` or `e.scope = scope`). */
  scope: string;
  /**
   * The enclosing query reads one known profile: event history is then probed per profile
   * through the profile index instead of resolved for the whole scope at once.
   */
  single?: boolean;
}

interface _Ctx {
  sql: Sql;
  now: Date;
  scope: string;
  single: boolean;
}

/**
 * Compiles a validated tree to a boolean SQL fragment over `p` (profiles) or `e` (events) of
 * `options.scope`; it re-validates (scope references allowed) and throws 400
 * `invalid_condition` on a bad tree. The fragment is never SQL NULL and is only meaningful under
 * the enclosing query's own scope filter. Returned synchronously: interpolate it
 * (`sql\`... where p.scope = ${scope} and ${fragment}\``), do not await it.
 */
export function compileCondition(
  sql: Sql,
  condition: Condition,
  options: CompileOptions,
): SqlFragment {
  const checked = validateCondition(condition, { itemType: options.itemType, allowScope: true });
  if (!checked.ok) throw _invalid(checked.issues);
  const ctx = { sql, now: options.now, scope: options.scope, single: options.single ?? false };
  return _compileNode(ctx, checked.condition, options.itemType);
}

function _compileNode(c: _Ctx, node: Condition, context: ItemType): SqlFragment {
  const { sql } = c;
  const params = node.parameterValues;
  switch (node.type) {
    case "booleanCondition": {
      const parts = (params.subConditions as Condition[]).map((sub) =>
        _compileNode(c, sub, context)
      );
      return params.operator === "and" ? _and(sql, parts) : _or(sql, parts);
    }
    case "notCondition":
      return sql`(not ${_compileNode(c, params.subCondition as Condition, context)})`;
    case "matchAllCondition":
      return sql`true`;
    case "eventTypeCondition":
      return sql`(e.event_type = ${params.eventTypeId as string}::text)`;
    case "pastEventCondition":
      return _compilePastEvents(c, params);
    default:
      return _compileProperty(c, params, context);
  }
}

function _and(sql: Sql, parts: SqlFragment[]): SqlFragment {
  return sql`(${parts.reduce((acc, part) => sql`${acc} and ${part}`)})`;
}

function _or(sql: Sql, parts: SqlFragment[]): SqlFragment {
  return sql`(${parts.reduce((acc, part) => sql`${acc} or ${part}`)})`;
}

/**
 * A pastEventCondition. Over a whole scope, the matching events are resolved once to their
 * (alias-resolved) profiles and joined (a hash semi- or anti-join); probing each profile's
 * history instead costs an index lookup per profile, which only pays for a single profile.
 */
function _compilePastEvents(c: _Ctx, params: Record<string, unknown>): SqlFragment {
  const { sql, now } = c;
  const where: SqlFragment[] = [sql`e.scope = ${c.scope}`];
  if (params.numberOfDays !== undefined) {
    const since = new Date(now.getTime() - (params.numberOfDays as number) * _DAY);
    where.push(sql`e.time_stamp > ${since.toISOString()}::timestamptz`);
  }
  if (params.fromDate !== undefined) {
    const [from] = _dateSpan("dateExpr", params.fromDate as string, now);
    where.push(sql`e.time_stamp >= ${from.toISOString()}::timestamptz`);
  }
  if (params.toDate !== undefined) {
    const [, until] = _dateSpan("dateExpr", params.toDate as string, now);
    where.push(sql`e.time_stamp < ${until.toISOString()}::timestamptz`);
  }
  where.push(_compileNode(c, params.eventCondition as Condition, "event"));
  const min = params.operator === "eventsNotOccurred"
    ? 0
    : (params.minimumEventCount as number | undefined) ?? 1;
  const max = params.operator === "eventsNotOccurred"
    ? 0
    : params.maximumEventCount as number | undefined;
  if (min === 0 && max === undefined) return sql`true`;
  return c.single
    ? _pastEventsOfOne(sql, _and(sql, where), min, max)
    : _pastEventsOfScope(sql, _and(sql, where), min, max);
}

function _pastEventsOfScope(
  sql: Sql,
  where: SqlFragment,
  min: number,
  max: number | undefined,
): SqlFragment {
  const matching = sql`
    select coalesce(a.profile_id, e.profile_id) as pid
    from events e left join profile_aliases a on a.scope = e.scope and a.alias_id = e.profile_id
    where ${where}`;
  // Zero events qualify: the profiles with more than the maximum are the ones excluded.
  if (min === 0) {
    const excluded = max === 0 ? matching : sql`${matching} group by 1 having count(*) > ${max!}`;
    return sql`(not exists (select 1 from (${excluded}) m where m.pid = p.item_id))`;
  }
  if (min === 1 && max === undefined) return sql`(p.item_id in (${matching}))`;
  return sql`(p.item_id in (${matching} group by 1 having count(*) >= ${min}${
    max === undefined ? sql`` : sql` and count(*) <= ${max}`
  }))`;
}

function _pastEventsOfOne(
  sql: Sql,
  where: SqlFragment,
  min: number,
  max: number | undefined,
): SqlFragment {
  const matching = sql`select 1 from events e where e.profile_id = any(array(
      select p.item_id
      union all
      select a.alias_id from profile_aliases a where a.scope = p.scope and a.profile_id = p.item_id))
    and ${where}`;
  // Counting stops one past the bound that decides: enough, however many events there are.
  const counted = (limit: number) => sql`(select count(*) from (${matching} limit ${limit}) as c)`;
  if (max === undefined) {
    return min === 1 ? sql`(exists (${matching}))` : sql`(${counted(min)} >= ${min})`;
  }
  if (max === 0) return sql`(not exists (${matching}))`;
  return sql`(${counted(max + 1)} between ${min} and ${max})`;
}

function _column(sql: Sql, column: _Column): SqlFragment {
  switch (column) {
    case "p.item_id":
      return sql`p.item_id`;
    case "p.scope":
      return sql`p.scope`;
    case "p.first_visit":
      return sql`p.first_visit`;
    case "p.last_visit":
      return sql`p.last_visit`;
    case "p.nb_of_visits":
      return sql`p.nb_of_visits`;
    case "e.id":
      return sql`e.id`;
    case "e.scope":
      return sql`e.scope`;
    case "e.event_type":
      return sql`e.event_type`;
    case "e.profile_id":
      return sql`e.profile_id`;
    case "e.session_id":
      return sql`e.session_id`;
    case "e.time_stamp":
      return sql`e.time_stamp`;
  }
}

function _jsonRoot(sql: Sql, root: _JsonRoot): SqlFragment {
  switch (root) {
    case "p.properties":
      return sql`p.properties`;
    case "e.properties":
      return sql`e.properties`;
    case "e.flattened_properties":
      return sql`e.flattened_properties`;
    case "e.target":
      return sql`e.target`;
  }
}

/**
 * The SQL expression of a property: a fixed column, or `<fixed jsonb column> #> $n::text[]`
 * (jsonb, SQL NULL when absent). For the query routes' metrics and aggregates too.
 */
export function propertyExpression(sql: Sql, source: PropertySource): SqlFragment {
  return source.kind === "json"
    ? sql`(${_jsonRoot(sql, source.root)} #> ${source.path}::text[])`
    : _column(sql, source.column);
}

type _CmpType = "text" | "numeric" | "timestamptz";

function _cmpType(kind: _ValueKind): _CmpType {
  return kind === "string"
    ? "text"
    : kind === "integer" || kind === "double"
    ? "numeric"
    : "timestamptz";
}

const _NULLABLE_COLUMNS: ReadonlySet<_Column> = new Set(["p.first_visit", "p.last_visit"]);

/**
 * True when some value of the property satisfies `pred`: each scalar element of a jsonb array,
 * else the scalar itself, or the column; never NULL. Only arrays pay for the expansion: a
 * scalar (the common case) is compared in place.
 */
function _some(
  sql: Sql,
  source: PropertySource,
  type: _CmpType,
  pred: (scalar: SqlFragment) => SqlFragment,
  anyOf?: (elements: SqlFragment) => SqlFragment,
): SqlFragment {
  if (source.kind !== "json") {
    const column = _column(sql, source.column);
    return _NULLABLE_COLUMNS.has(source.column)
      ? sql`coalesce(${pred(column)}, false)`
      : pred(column);
  }
  const value = propertyExpression(sql, source);
  // With `anyOf`, an array is tested through its typed elements (value op ANY(...)): a function
  // call keeps the scan parallel safe, where a correlated subquery would not.
  const array = anyOf
    ? anyOf(
      type === "text"
        ? sql`cdp_texts(${value})`
        : type === "numeric"
        ? sql`cdp_numbers(${value})`
        : sql`cdp_timestamps(${value})`,
    )
    : sql`exists (select 1 from cdp_elements(${value}) as x(v) where ${
      pred(
        type === "text"
          ? sql`(x.v #>> '{}')`
          : type === "numeric"
          ? sql`cdp_jsonb_numeric(x.v)`
          : sql`cdp_try_timestamptz(x.v #>> '{}')`,
      )
    })`;
  // Each extra read of the path costs about as much as the comparison itself, so the scalar
  // branch reads it as few times as its type allows.
  if (type === "numeric") {
    return sql`(case jsonb_typeof(${value})
      when 'number' then coalesce(${pred(sql`(${value})::numeric`)}, false)
      when 'array' then ${array}
      else false end)`;
  }
  const scalar = type === "text"
    ? sql`(${value} #>> '{}')`
    : sql`cdp_try_timestamptz(${value} #>> '{}')`;
  // Objects and JSON null hold no scalar: their text form must not be compared.
  return sql`(case jsonb_typeof(${value})
    when 'array' then ${array}
    when 'object' then false
    when 'null' then false
    else coalesce(${pred(scalar)}, false) end)`;
}

/**
 * An expression of parameters only, computed once per query (an InitPlan). A repeated statement
 * runs a generic plan, where parameters are not constants: a cast or constructor over them would
 * otherwise be evaluated again for every row (a text-to-jsonb cast per row doubled a count).
 */
function _once(sql: Sql, expression: SqlFragment): SqlFragment {
  return sql`(select ${expression})`;
}

const _JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * `equals` with a text value on a jsonb property, the commonest segment test, in one read of the
 * path: a scalar matches when its text is the value (which, not starting with `[` or `{`, can be
 * no array's or object's text); an array is first screened by containment on the whole document
 * (no copy of the property), then checked exactly. Same answers as the general form.
 */
function _textEquals(
  sql: Sql,
  source: Extract<PropertySource, { kind: "json" }>,
  value: string,
): SqlFragment {
  const root = _jsonRoot(sql, source.root);
  // The JSON scalars whose text is `value`: a string, and a number or boolean spelled alike.
  const candidates = [JSON.stringify(value)];
  if (_JSON_NUMBER.test(value)) candidates.push(value);
  if (value === "true" || value === "false") candidates.push(value);
  const screens = candidates.map((candidate) => {
    const document = source.path.reduceRight(
      (inner, key) => `{${JSON.stringify(key)}:${inner}}`,
      `[${candidate}]`,
    );
    return sql`${root} @> ${_once(sql, sql`${document}::text::jsonb`)}`;
  });
  const property = propertyExpression(sql, source);
  return sql`(case ${root} #>> ${source.path}::text[] when ${value}::text then true
    else coalesce((${screens.reduce((acc, screen) => sql`${acc} or ${screen}`)})
      and jsonb_typeof(${property}) = 'array' and ${value}::text = any(cdp_texts(${property})),
      false) end)`;
}

/** Elasticsearch's exists: present, not JSON null, and an array only with a non-null element. */
function _exists(sql: Sql, value: SqlFragment): SqlFragment {
  // Spelled out rather than cdp_jsonb_exists(): a function holding a subquery is not inlined,
  // and calling it per row cost several times the comparison. A simple CASE reads the property
  // once; every branch but the array's is a constant, and that one is parallel safe.
  return sql`(case jsonb_typeof(${value})
    when 'array' then jsonb_path_exists(${value}, '$[*] ? (@.type() != "null")')
    when 'string' then true
    when 'number' then true
    when 'boolean' then true
    when 'object' then true
    else false end)`;
}

type _Bound =
  | { type: "text"; value: SqlFragment }
  | { type: "numeric"; value: SqlFragment; n: number }
  | {
    type: "timestamptz";
    lo: SqlFragment;
    hi: SqlFragment;
    span: [number, number];
    day: [SqlFragment, SqlFragment];
  };

function _bound(sql: Sql, kind: _ValueKind, value: unknown, now: Date): _Bound {
  switch (kind) {
    case "string":
      return { type: "text", value: sql`${value as string}::text` };
    case "integer":
    case "double":
      return { type: "numeric", value: sql`${String(value)}::numeric`, n: value as number };
    default: {
      const [lo, hi] = _dateSpan(kind, value as string, now);
      const day = _floorUnit(lo.getTime(), "d");
      return {
        type: "timestamptz",
        lo: sql`${lo.toISOString()}::timestamptz`,
        hi: sql`${hi.toISOString()}::timestamptz`,
        span: [lo.getTime(), hi.getTime()],
        day: [
          sql`${new Date(day).toISOString()}::timestamptz`,
          sql`${new Date(day + _DAY).toISOString()}::timestamptz`,
        ],
      };
    }
  }
}

/**
 * [from, to] as one range (a test then reads the property once, not twice): null for text,
 * which has no range type, and `false` when inverted (a range constructor would raise on it).
 */
function _range(sql: Sql, from: _Bound, to: _Bound): SqlFragment | false | null {
  if (from.type === "numeric" && to.type === "numeric") {
    return from.n > to.n ? false : _once(sql, sql`numrange(${from.value}, ${to.value}, '[]')`);
  }
  if (from.type === "timestamptz" && to.type === "timestamptz") {
    // A date stands for the span of its precision: from its start to the end of `to`'s span.
    return from.span[0] >= to.span[1]
      ? false
      : _once(sql, sql`tstzrange(${from.lo}, ${to.hi}, '[)')`);
  }
  return null;
}

/** A single-value comparison of `s` against a bound. */
function _compare(
  sql: Sql,
  s: SqlFragment,
  op: "eq" | "gt" | "gte" | "lt" | "lte",
  b: _Bound,
): SqlFragment {
  if (b.type === "timestamptz") {
    // A date stands for the span [lo, hi) of its precision, as in Elasticsearch ranges.
    switch (op) {
      case "eq":
        return sql`${_once(sql, sql`tstzrange(${b.lo}, ${b.hi}, '[)')`)} @> ${s}`;
      case "gt":
        return sql`${s} >= ${b.hi}`;
      case "gte":
        return sql`${s} >= ${b.lo}`;
      case "lt":
        return sql`${s} < ${b.lo}`;
      case "lte":
        return sql`${s} < ${b.hi}`;
    }
  }
  if (op === "eq") return sql`${s} = ${b.value}`;
  // Text orders by code point, the same on every server whatever its default collation.
  const left = b.type === "text" ? sql`(${s} collate "C")` : s;
  switch (op) {
    case "gt":
      return sql`${left} > ${b.value}`;
    case "gte":
      return sql`${left} >= ${b.value}`;
    case "lt":
      return sql`${left} < ${b.value}`;
    case "lte":
      return sql`${left} <= ${b.value}`;
  }
}

/** {@linkcode _compare} for some element of a typed array: `bound op ANY(elements)`. */
function _compareAny(
  sql: Sql,
  elements: SqlFragment,
  op: "eq" | "gt" | "gte" | "lt" | "lte",
  b: _Bound,
): SqlFragment {
  if (b.type === "timestamptz") {
    switch (op) {
      case "eq":
        return sql`${_once(sql, sql`tstzrange(${b.lo}, ${b.hi}, '[)')`)} @> any(${elements})`;
      case "gt":
        return sql`${b.hi} <= any(${elements})`;
      case "gte":
        return sql`${b.lo} <= any(${elements})`;
      case "lt":
        return sql`${b.lo} > any(${elements})`;
      case "lte":
        return sql`${b.hi} > any(${elements})`;
    }
  }
  const bound = b.type === "text" ? sql`(${b.value} collate "C")` : b.value;
  switch (op) {
    case "eq":
      return sql`${b.value} = any(${elements})`;
    case "gt":
      return sql`${bound} < any(${elements})`;
    case "gte":
      return sql`${bound} <= any(${elements})`;
    case "lt":
      return sql`${bound} > any(${elements})`;
    case "lte":
      return sql`${bound} >= any(${elements})`;
  }
}

/**
 * How a scalar matches one of a list of values (`match`), and the list as rows `w(v)` or
 * `w(lo, hi)` for the `all` operator (`from`).
 */
function _list(
  sql: Sql,
  kind: _ValueKind,
  values: unknown[],
  now: Date,
): {
  from: SqlFragment;
  match: (s: SqlFragment) => SqlFragment;
  any: (s: SqlFragment) => SqlFragment;
  /** Some element of a typed array is in the list (text and numbers only). */
  overlaps?: (elements: SqlFragment) => SqlFragment;
} {
  const type = _cmpType(kind);
  if (type !== "timestamptz") {
    const array = type === "text"
      ? sql`${values as string[]}::text[]`
      : sql`${values.map(String)}::numeric[]`;
    return {
      from: sql`unnest(${array}) as w(v)`,
      match: (s) => sql`${s} = w.v`,
      any: (s) => sql`${s} = any(${array})`,
      overlaps: (elements) => sql`${elements} && ${array}`,
    };
  }
  const spans = values.map((v) => _dateSpan(kind as "date" | "dateExpr", v as string, now));
  const from = sql`unnest(${spans.map(([lo]) => lo.toISOString())}::timestamptz[], ${
    spans.map(([, hi]) => hi.toISOString())
  }::timestamptz[]) as w(lo, hi)`;
  const match = (s: SqlFragment) => sql`(${s} >= w.lo and ${s} < w.hi)`;
  return { from, match, any: (s) => sql`exists (select 1 from ${from} where ${match(s)})` };
}

const _NEGATIONS: Record<string, string> = {
  notEquals: "equals",
  notIn: "in",
  notContains: "contains",
  hasNoneOf: "hasSomeOf",
  isNotDay: "isDay",
};

function _compileProperty(
  c: _Ctx,
  params: Record<string, unknown>,
  context: ItemType,
): SqlFragment {
  const { sql, now } = c;
  const resolved = resolveProperty(context, params.propertyName as string, { allowScope: true });
  if (!resolved.ok) throw new Error(`unvalidated property name: ${resolved.message}`);
  const source = resolved.source;
  const operator = params.comparisonOperator as string;
  const positive = _NEGATIONS[operator];
  if (positive !== undefined) {
    return sql`(not ${_compileProperty(c, { ...params, comparisonOperator: positive }, context)})`;
  }
  // The injected scope predicate restates the enclosing query's own scope filter.
  if (
    source.kind === "text" && (source.column === "p.scope" || source.column === "e.scope") &&
    operator === "equals" && params.propertyValue === c.scope
  ) {
    return sql`true`;
  }
  if (operator === "exists" || operator === "missing") {
    const exists = source.kind === "json"
      ? _exists(sql, propertyExpression(sql, source))
      : sql`(${_column(sql, source.column)} is not null)`;
    return operator === "exists" ? exists : sql`(not ${exists})`;
  }
  const key = _VALUE_KEYS.find((k) => params[k] !== undefined)!;
  const { kind } = _VALUE_PARAMS.get(key)!;
  const value = params[key];
  const type = _cmpType(kind);
  const single = (op: "eq" | "gt" | "gte" | "lt" | "lte") => {
    const b = _bound(sql, kind, value, now);
    return _some(
      sql,
      source,
      type,
      (s) => _compare(sql, s, op, b),
      (elements) => _compareAny(sql, elements, op, b),
    );
  };
  switch (operator) {
    case "equals":
      return source.kind === "json" && kind === "string" && !/^[[{]/.test(value as string)
        ? _textEquals(sql, source, value as string)
        : single("eq");
    case "greaterThan":
      return single("gt");
    case "greaterThanOrEqualTo":
      return single("gte");
    case "lessThan":
      return single("lt");
    case "lessThanOrEqualTo":
      return single("lte");
    case "between": {
      const [from, to] = (value as unknown[]).map((v) => _bound(sql, kind, v, now));
      const range = _range(sql, from!, to!);
      if (range === false) return sql`false`;
      if (range === null) {
        return _some(
          sql,
          source,
          type,
          (s) => sql`(${_compare(sql, s, "gte", from!)} and ${_compare(sql, s, "lte", to!)})`,
        );
      }
      return _some(
        sql,
        source,
        type,
        // An integer column needs numeric to meet numrange.
        (s) => sql`${range} @> ${type === "numeric" ? sql`(${s})::numeric` : s}`,
        (elements) => sql`${range} @> any(${elements})`,
      );
    }
    case "contains":
      return _some(sql, source, "text", (s) => sql`strpos(${s}, ${value as string}::text) > 0`);
    case "startsWith":
      return _some(sql, source, "text", (s) => sql`starts_with(${s}, ${value as string}::text)`);
    case "endsWith":
      return _some(
        sql,
        source,
        "text",
        (s) => sql`right(${s}, length(${value as string}::text)) = ${value as string}::text`,
      );
    case "matchesRegex":
      // Anchored like Lucene's regexp query: the whole value must match.
      return _some(
        sql,
        source,
        "text",
        (s) => sql`${s} ~ ${_once(sql, sql`'^(?:' || ${value as string}::text || ')$'`)}`,
      );
    case "in":
    case "hasSomeOf": {
      const list = _list(sql, kind, value as unknown[], now);
      return _some(sql, source, type, list.any, list.overlaps);
    }
    case "all": {
      const list = _list(sql, kind, value as unknown[], now);
      return sql`(not exists (select 1 from ${list.from} where not ${
        _some(sql, source, type, list.match)
      }))`;
    }
    case "inContains":
      return _some(
        sql,
        source,
        "text",
        (s) =>
          sql`exists (select 1 from unnest(${value as string[]}::text[]) as w(v) where strpos(${s}, w.v) > 0)`,
      );
    case "isDay": {
      const b = _bound(sql, kind, value, now);
      if (b.type !== "timestamptz") throw new Error("isDay takes a date");
      const day = _once(sql, sql`tstzrange(${b.day[0]}, ${b.day[1]}, '[)')`);
      return _some(
        sql,
        source,
        type,
        (s) => sql`${day} @> ${s}`,
        (elements) => sql`${day} @> any(${elements})`,
      );
    }
    default:
      throw new Error(`unvalidated comparison operator ${operator}`);
  }
}
