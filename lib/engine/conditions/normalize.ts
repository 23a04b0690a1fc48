/**
 * The canonical JSON of a parsed condition tree: what a segment stores and GET shows. Every node
 * has `parameterValues`; numbers written as strings are numbers; a date given as a JSON integer
 * (epoch milliseconds) is its ISO 8601 instant. Anything else is kept as written.
 *
 * @module
 */
import { isObject } from "./shape.ts";
import { dateText, integerValue, numberValue } from "./values.ts";
import { type Condition, VALUE_PARAMS, type ValueKind } from "./vocabulary.ts";

function _canonical(kind: ValueKind, value: unknown): unknown {
  switch (kind) {
    case "integer":
      return integerValue(value) ?? value;
    case "double":
      return numberValue(value) ?? value;
    case "date":
    case "dateExpr":
      return dateText(value) ?? value;
    default:
      return value;
  }
}

/** The canonical copy of a tree that {@link ./validation.ts} accepted (never mutates it). */
export function normalizeCondition(raw: unknown): Condition {
  const node = raw as Record<string, unknown>;
  const params = isObject(node.parameterValues) ? node.parameterValues : {};
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(params)) {
    const spec = VALUE_PARAMS.get(key);
    if (spec) {
      out[key] = spec.plural && Array.isArray(value)
        ? value.map((item) => _canonical(spec.kind, item))
        : _canonical(spec.kind, value);
    } else if (key === "subConditions" && Array.isArray(value)) {
      out[key] = value.map(normalizeCondition);
    } else if (key === "subCondition" || key === "eventCondition") {
      out[key] = normalizeCondition(value);
    } else out[key] = structuredClone(value);
  }
  return { type: node.type as string, parameterValues: out };
}
