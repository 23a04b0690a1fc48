/**
 * Property names of conditions: the allowlist that resolves a name to a fixed column or to a path
 * under a fixed jsonb column, and the SQL expression of each (no SQL text is built from input).
 *
 * @module
 */
import type { Sql } from "../../store/db.ts";
import { quote } from "./shape.ts";
import { ALL_KINDS, type ItemType, type SqlFragment, type ValueKind } from "./vocabulary.ts";

/** The fixed columns a property can resolve to. */
export type Column =
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
 * columns); event `properties.*`, `flattenedProperties.*`, `target.properties.*`,
 * `timeStamp`, `eventType`, `profileId`, `sessionId`, `itemId`, `target.itemId`,
 * `target.itemType`. Any segment named
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
        "dot-separated segments of letters, digits and _, and itemId)"
      : `unknown event property ${quote(name)} (allowed: properties.<name>, ` +
        "flattenedProperties.<name>, target.properties.<name>, timeStamp, eventType, " +
        "profileId, sessionId, itemId, target.itemId, target.itemType)",
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

/** The SQL of a fixed jsonb column (a closed switch: no text from input). */
export function jsonRootSql(sql: Sql, root: _JsonRoot): SqlFragment {
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
    ? sql`(${jsonRootSql(sql, source.root)} #> ${source.path}::text[])`
    : columnSql(sql, source.column);
}
