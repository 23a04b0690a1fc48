/**
 * Property names of conditions: the allowlist that resolves a name to a fixed column or to a path
 * under a fixed jsonb column, and the SQL expression of each (no SQL text is built from input).
 *
 * @module
 */
import type { Sql } from "../../store/db.ts";
import { CONSENT_TYPE_PATTERN } from "../consents.ts";
import { quote } from "./shape.ts";
import { ALL_KINDS, type PropertyContext, type SqlFragment, type ValueKind } from "./vocabulary.ts";

/** The fixed columns a property can resolve to. */
export type Column =
  | "p.item_id"
  | "p.scope"
  | "p.first_visit"
  | "p.last_visit"
  | "p.nb_of_visits"
  | "pred.p_alive"
  | "pred.expected_orders_90d"
  | "pred.expected_orders_365d"
  | "pred.predicted_clv_365d"
  | "pred.expected_next_order_at"
  | "e.id"
  | "e.scope"
  | "e.event_type"
  | "e.profile_id"
  | "e.session_id"
  | "e.time_stamp"
  | "s.item_id"
  | "s.profile_id"
  | "s.first_event_at"
  | "s.last_event_at"
  | "s.event_count"
  | "s.duration";

type _JsonRoot =
  | "p.properties"
  | "p.consents"
  | "e.properties"
  | "e.flattened_properties"
  | "e.target"
  | "s.properties";

/** Where a property lives: a fixed column or a path under a fixed jsonb column. */
export type PropertySource =
  | { kind: "json"; root: _JsonRoot; path: string[] }
  | { kind: "text" | "timestamptz" | "integer"; column: Column };

/** The value kinds each property source can be compared with. */
export const SOURCE_KINDS: Record<PropertySource["kind"], readonly ValueKind[]> = {
  json: ALL_KINDS,
  text: ["string"],
  timestamptz: ["date", "dateExpr"],
  integer: ["integer", "double"],
};

/** How messages name each property source. */
export const SOURCE_TEXT: Record<PropertySource["kind"], string> = {
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
  // The profile's predictions from its brand's last fit (profile_predictions, computed, never
  // written by events): NULL, so only `missing` matches, for a profile without any. "integer"
  // is the kind of every number column (compared as numeric).
  ["predictions.p_alive", { kind: "integer", column: "pred.p_alive" }],
  ["predictions.expected_orders_90d", { kind: "integer", column: "pred.expected_orders_90d" }],
  ["predictions.expected_orders_365d", { kind: "integer", column: "pred.expected_orders_365d" }],
  ["predictions.predicted_clv_365d", { kind: "integer", column: "pred.predicted_clv_365d" }],
  [
    "predictions.expected_next_order_at",
    { kind: "timestamptz", column: "pred.expected_next_order_at" },
  ],
]);

/** Columns read from the profile's row of profile_predictions, which it may not have. */
export const PREDICTION_COLUMNS: ReadonlySet<Column> = new Set([
  "pred.p_alive",
  "pred.expected_orders_90d",
  "pred.expected_orders_365d",
  "pred.predicted_clv_365d",
  "pred.expected_next_order_at",
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

// A session's fields under Apache Unomi's names (its Session item): timeStamp is when it began,
// lastEventDate its last event, size its number of events and duration the milliseconds between.
const _SESSION_FIELDS = new Map<string, PropertySource>([
  ["itemId", { kind: "text", column: "s.item_id" }],
  ["profileId", { kind: "text", column: "s.profile_id" }],
  ["timeStamp", { kind: "timestamptz", column: "s.first_event_at" }],
  ["lastEventDate", { kind: "timestamptz", column: "s.last_event_at" }],
  ["size", { kind: "integer", column: "s.event_count" }],
  ["duration", { kind: "integer", column: "s.duration" }],
]);

const _SESSION_NAMES = [..._SESSION_FIELDS.keys()].join(", ");

const _SEGMENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const _SCOPE_SEGMENTS = new Set(["scope", "shopDomain"]);
/** Property names that make a condition node a scope predicate. */
export const SCOPE_PROPERTY_NAMES = new Set([
  "properties.shopDomain",
  "properties.scope",
  "scope",
  "shopDomain",
]);

/**
 * Resolves a property name of a profile or event condition against the allowlist: profile
 * `properties.<seg>(.<seg>){0,4}` and `itemId` (firstVisit, lastVisit and nbOfVisits are
 * columns), `predictions.<p_alive|expected_orders_90d|expected_orders_365d|predicted_clv_365d|
 * expected_next_order_at>`; event `properties.*`, `flattenedProperties.*`, `target.properties.*`,
 * `timeStamp`, `eventType`, `profileId`, `sessionId`, `itemId`, `target.itemId`,
 * `target.itemType`; a session (sessionPropertyCondition) `itemId`, `profileId`, `timeStamp`,
 * `lastEventDate`, `size`, `duration` and `properties.*` (referringURL, userAgentName, ...).
 * Any segment named `scope` or `shopDomain` is refused unless `allowScope`.
 */
export function resolveProperty(
  itemType: PropertyContext,
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
    return {
      ok: false,
      message: "systemProperties are out of scope: they are Unomi's internal bookkeeping " +
        "(merges, anonymity, last updates), which the engine keeps in its own columns, not as " +
        "properties",
    };
  }
  if (itemType === "session") return _resolveSession(name, segments);
  const fixed = (itemType === "profile" ? _PROFILE_FIELDS : _EVENT_FIELDS).get(name);
  if (fixed) return { ok: true, source: fixed };
  if (itemType === "profile" && segments[0] === "consents") return _resolveConsent(name, segments);
  // Every profile carries properties.shopDomain = its scope (the engine alone writes it), so a
  // scope predicate the service allows (a segment row written by older code) reads the indexed
  // column instead.
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
    : segments[0] === "target" && segments[1] === "properties"
    ? "e.target"
    : undefined;
  // Under the target document, `properties` is part of the path: target.properties.<seg> is
  // held at properties.<seg> of the event's target column.
  const names = segments.slice(root === "e.target" ? 2 : 1);
  if (root && names.length >= 1 && names.length <= 5 && names.every((s) => _SEGMENT.test(s))) {
    const path = root === "e.target" ? ["properties", ...names] : names;
    return { ok: true, source: { kind: "json", root, path } };
  }
  return {
    ok: false,
    message: itemType === "profile"
      ? `unknown profile property ${quote(name)} (allowed: properties.<name> with up to 5 ` +
        "dot-separated segments of letters, digits and _, itemId, and predictions.p_alive, " +
        "predictions.expected_orders_90d, predictions.expected_orders_365d, " +
        "predictions.predicted_clv_365d, predictions.expected_next_order_at)"
      : `unknown event property ${quote(name)} (allowed: properties.<name>, ` +
        "flattenedProperties.<name>, target.properties.<name>, timeStamp, eventType, " +
        "profileId, sessionId, itemId, target.itemId, target.itemType)",
  };
}

// A consent's fields (lib/engine/consents.ts); its key is Unomi's typeIdentifier.
const _CONSENT_FIELDS = new Set(["status", "statusDate", "revokeDate", "typeIdentifier"]);

// consents.<typeIdentifier>.<field>: the type identifier may hold dots, so the field is the last
// segment and the key everything between.
function _resolveConsent(
  name: string,
  segments: string[],
): { ok: true; source: PropertySource } | { ok: false; message: string } {
  const field = segments[segments.length - 1]!;
  const key = segments.slice(1, -1).join(".");
  if (segments.length >= 3 && _CONSENT_FIELDS.has(field) && CONSENT_TYPE_PATTERN.test(key)) {
    return { ok: true, source: { kind: "json", root: "p.consents", path: [key, field] } };
  }
  return {
    ok: false,
    message: `unknown consent property ${quote(name)} (allowed: consents.<typeIdentifier>.` +
      "status, .statusDate, .revokeDate or .typeIdentifier)",
  };
}

function _resolveSession(
  name: string,
  segments: string[],
): { ok: true; source: PropertySource } | { ok: false; message: string } {
  const fixed = _SESSION_FIELDS.get(name);
  if (fixed) return { ok: true, source: fixed };
  const names = segments.slice(1);
  if (
    segments[0] === "properties" && names.length >= 1 && names.length <= 5 &&
    names.every((s) => _SEGMENT.test(s))
  ) {
    return { ok: true, source: { kind: "json", root: "s.properties", path: names } };
  }
  const why = segments[0] === "properties"
    ? "properties.<name> takes up to 5 dot-separated segments of letters, digits and _"
    : segments[0] === "profile"
    ? "a session's profile is not addressable from it (use profilePropertyCondition)"
    : "unknown session field";
  return {
    ok: false,
    message: `${quote(name)}: ${why} (session fields: ${_SESSION_NAMES}, properties.<name>)`,
  };
}

/** The SQL of a fixed column (a closed switch: no text from input). */
export function columnSql(sql: Sql, column: Column): SqlFragment {
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
    case "pred.p_alive":
    case "pred.expected_orders_90d":
    case "pred.expected_orders_365d":
    case "pred.predicted_clv_365d":
    case "pred.expected_next_order_at":
      // One primary-key probe per profile read; NULL when the profile has no predictions.
      return sql`(select ${sql(column.slice("pred.".length))} from profile_predictions pred
        where pred.scope = p.scope and pred.profile_id = p.item_id)`;
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
    case "s.item_id":
      return sql`s.item_id`;
    case "s.profile_id":
      return sql`s.profile_id`;
    case "s.first_event_at":
      return sql`s.first_event_at`;
    case "s.last_event_at":
      return sql`s.last_event_at`;
    case "s.event_count":
      return sql`s.event_count`;
    case "s.duration":
      return sql`(extract(epoch from s.last_event_at - s.first_event_at) * 1000)`;
  }
}

/** The SQL of a fixed jsonb column (a closed switch: no text from input). */
export function jsonRootSql(sql: Sql, root: _JsonRoot): SqlFragment {
  switch (root) {
    case "p.properties":
      return sql`p.properties`;
    case "p.consents":
      return sql`p.consents`;
    case "e.properties":
      return sql`e.properties`;
    case "e.flattened_properties":
      return sql`e.flattened_properties`;
    case "e.target":
      return sql`e.target`;
    case "s.properties":
      return sql`s.properties`;
  }
}

/**
 * The SQL expression of a property: a fixed column, or `<fixed jsonb column> #> $n::text[]`
 * (jsonb, SQL NULL when absent), written `-> $n::text` for one key that cannot be read as an
 * array index. For the query routes' metrics and aggregates too.
 */
export function propertyExpression(sql: Sql, source: PropertySource): SqlFragment {
  if (source.kind !== "json") return columnSql(sql, source.column);
  const root = jsonRootSql(sql, source.root);
  return singleKey(source.path)
    ? sql`(${root} -> ${source.path[0]!}::text)`
    : sql`(${root} #> ${source.path}::text[])`;
}

/**
 * Whether a path is one key that `->` and `->>` read as `#>` and `#>>` do: not starting like an
 * integer, which `#>` would take as an array index (on a root that is no object both give NULL).
 * `->` reads the key directly, where `#>` unpacks its path array on every row.
 */
export function singleKey(path: readonly string[]): boolean {
  return path.length === 1 && /^[A-Za-z_]/.test(path[0]!);
}
