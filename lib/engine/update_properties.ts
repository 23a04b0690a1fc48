/**
 * Apache Unomi's `updateProperties` event, as a pure function over a profile's properties:
 * `update` sets (null removes), `add` sets only what is absent, `delete` removes. Keys are
 * `properties.<name>` paths; dots address nested objects.
 *
 * @module
 */

/** The `properties` payload of an updateProperties event. */
export interface UpdatePropertiesPayload {
  update?: Record<string, unknown>;
  add?: Record<string, unknown>;
  delete?: Record<string, unknown>;
  targetId?: string;
  targetType?: string;
}

const _PREFIX = "properties.";
// Object keys that would reach Object.prototype if written naively.
const _UNSAFE_SEGMENTS = new Set(["__proto__", "prototype", "constructor"]);

/** Why a payload cannot be applied, or null when it can. */
export function checkUpdateProperties(payload: UpdatePropertiesPayload): string | null {
  for (const section of ["update", "add", "delete"] as const) {
    for (const key of Object.keys(payload[section] ?? {})) {
      const problem = _checkPath(key);
      if (problem) return `properties.${section}["${key}"]: ${problem}`;
    }
  }
  return null;
}

/**
 * Returns new properties with the payload applied (the input is not modified) and whether
 * anything changed. Call {@linkcode checkUpdateProperties} first.
 */
export function applyUpdateProperties(
  current: Record<string, unknown>,
  payload: UpdatePropertiesPayload,
): { properties: Record<string, unknown>; changed: boolean } {
  const next = structuredClone(current);
  for (const [key, value] of Object.entries(payload.update ?? {})) {
    if (value === null) _remove(next, _segments(key));
    else _set(next, _segments(key), value);
  }
  for (const [key, value] of Object.entries(payload.add ?? {})) {
    // "Only what is absent": a value on the way (o = 5 for properties.o.x) is present, too.
    if (value !== null && !_occupied(next, _segments(key))) _set(next, _segments(key), value);
  }
  for (const key of Object.keys(payload.delete ?? {})) _remove(next, _segments(key));
  return { properties: next, changed: !_deepEqual(next, current) };
}

function _checkPath(key: string): string | null {
  if (!key.startsWith(_PREFIX)) return "keys must start with properties.";
  const segments = _segments(key);
  if (segments.length === 0 || segments.some((s) => s.length === 0)) return "empty path segment";
  if (segments.length > 5) return "at most 5 levels of nesting";
  if (segments.some((s) => _UNSAFE_SEGMENTS.has(s))) return "reserved path segment";
  return null;
}

function _segments(key: string): string[] {
  return key.slice(_PREFIX.length).split(".");
}

function _isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** True when the path already holds a value, or a non-object stands where it leads. */
function _occupied(target: Record<string, unknown>, path: string[]): boolean {
  let node: unknown = target;
  for (const segment of path) {
    if (!_isObject(node)) return true;
    if (!Object.hasOwn(node, segment) || node[segment] === undefined) return false;
    node = node[segment];
  }
  return true;
}

/** Structural equality of JSON values; key order does not matter (Postgres reorders keys). */
function _deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length &&
      a.every((item, i) => _deepEqual(item, b[i]));
  }
  if (!_isObject(a) || !_isObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length &&
    keys.every((key) => Object.hasOwn(b, key) && _deepEqual(a[key], b[key]));
}

function _set(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const segment of path.slice(0, -1)) {
    if (!_isObject(node[segment])) node[segment] = {};
    node = node[segment] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function _remove(target: Record<string, unknown>, path: string[]): void {
  let node: unknown = target;
  for (const segment of path.slice(0, -1)) {
    if (!_isObject(node) || !_isObject(node[segment])) return;
    node = node[segment];
  }
  if (_isObject(node)) delete node[path[path.length - 1]!];
}
