/**
 * Segment export lines: one member as one NDJSON line, written by the database for the common
 * case and by {@linkcode exportLine} otherwise, byte for byte alike; a profile's predictions
 * (profile_predictions) are part of its line when it has any.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { IDENTITY_FIELDS } from "./profiles.ts";

/** The profile columns an export line is made of. */
export interface ExportRow {
  item_id: string;
  provenance: string;
  properties: Record<string, unknown>;
  first_visit: Date | null;
  last_visit: Date | null;
  /** The profile's predictions ({@linkcode exportPredictionsSql}); absent or null without. */
  predictions?: ExportPredictions | null;
}

/** The predictions an export line carries (profile_predictions, from the brand's last fit). */
export interface ExportPredictions {
  p_alive: number;
  predicted_clv_365d: string;
  expected_orders_365d: number;
}

/**
 * One export line: id, provenance, the identity fields present, the visit dates, and the
 * profile's predictions when it has any.
 */
export function exportLine(row: ExportRow): Record<string, unknown> {
  const line: Record<string, unknown> = { id: row.item_id, provenance: row.provenance };
  for (const field of IDENTITY_FIELDS) {
    const value = row.properties[field];
    if (value !== undefined && value !== null) line[field] = value;
  }
  const properties: Record<string, string> = {};
  if (row.first_visit) properties.firstVisit = row.first_visit.toISOString();
  if (row.last_visit) properties.lastVisit = row.last_visit.toISOString();
  line.properties = properties;
  if (row.predictions) {
    line.predictions = {
      p_alive: row.predictions.p_alive,
      predicted_clv_365d: row.predictions.predicted_clv_365d,
      expected_orders_365d: row.predictions.expected_orders_365d,
    };
  }
  return line;
}

/**
 * The text of `JSON.stringify(exportLine(row))` for the profile `p`, computed in SQL, or NULL
 * when the row holds a value whose JSON text the database would spell otherwise than JavaScript:
 * an identity field that is an object, an array or a number other than a short integer (jsonb
 * keeps `1.50` and spaces nested values), or a visit date outside the years 1000 to 9999 (where
 * the ISO form or the driver's parsing differ). Strings are escaped alike by both. The identity
 * fields are read from `r`, the row {@linkcode exportFieldsSql} makes of `p.properties`.
 */
export function exportLineSql(sql: Sql) {
  return sql.unsafe(_LINE);
}

/**
 * The predictions of the profile `p` as jsonb ({@linkcode ExportPredictions}), NULL without:
 * what {@linkcode exportLine} reads when the database could not write the line.
 */
export function exportPredictionsSql(sql: Sql) {
  return sql.unsafe(_PREDICTIONS_JSON);
}

/** `jsonb_to_record(p.properties) as r(...)`: the identity fields of `p`, read in one pass. */
export function exportFieldsSql(sql: Sql) {
  return sql.unsafe(_FIELDS);
}

function _field(name: string): string {
  if (!/^[A-Za-z]+$/.test(name)) throw new Error(`identity field ${name} is not a plain name`);
  return name;
}

const _NAMES = IDENTITY_FIELDS.map(_field);

// A document that is no object holds no field, as JavaScript reads it.
const _FIELDS = `jsonb_to_record(case jsonb_typeof(p.properties) when 'object' then p.properties
  else '{}' end) as r(${_NAMES.map((name) => `"${name}" jsonb`).join(", ")})`;

// JavaScript writes an integer of at most 15 digits as jsonb does; past 2^53 it rounds.
const _PLAIN = _NAMES.map((name) =>
  `(case jsonb_typeof(r."${name}") when 'object' then false when 'array' then false
     when 'number' then r."${name}"::text ~ '^-?(0|[1-9][0-9]{0,14})$' else true end)`
);

// A JSON null is absent from the line, as an absent property.
const _PIECES = _NAMES.map((name) =>
  `coalesce(',"${name}":' || nullif(r."${name}"::text, 'null'), '')`
);

// Milliseconds truncated, as the driver's Date keeps them.
const _ISO = (column: string) =>
  `to_char(p.${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

const _DATE_OK = (column: string) =>
  `(p.${column} is null or p.${column} >= '1000-01-01T00:00:00Z' and p.${column} < '10000-01-01T00:00:00Z')`;

// The stored numbers are rounded decimals (4 places), whose text without trailing zeros is the
// text JavaScript writes for the same number; the CLV is a 2-decimal money string.
const _PREDICTION_ROW = `from profile_predictions pred
  where pred.scope = p.scope and pred.profile_id = p.item_id`;

const _PREDICTIONS_TEXT =
  `coalesce((select ',"predictions":{"p_alive":' || trim_scale(pred.p_alive)::text
    || ',"predicted_clv_365d":"' || pred.predicted_clv_365d::text
    || '","expected_orders_365d":' || trim_scale(pred.expected_orders_365d)::text || '}'
  ${_PREDICTION_ROW}), '')`;

const _PREDICTIONS_JSON = `(select jsonb_build_object('p_alive', trim_scale(pred.p_alive),
    'predicted_clv_365d', pred.predicted_clv_365d::text,
    'expected_orders_365d', trim_scale(pred.expected_orders_365d))
  ${_PREDICTION_ROW})`;

const _LINE = `(case when ${_PLAIN.map((plain) => `coalesce(${plain}, true)`).join(" and ")}
    and ${_DATE_OK("first_visit")} and ${_DATE_OK("last_visit")}
  then '{"id":' || to_json(p.item_id)::text || ',"provenance":' || to_json(p.provenance)::text
    || ${_PIECES.join(" || ")}
    || ',"properties":{' || concat_ws(',', '"firstVisit":"' || ${_ISO("first_visit")} || '"',
                                         '"lastVisit":"' || ${_ISO("last_visit")} || '"') || '}'
    || ${_PREDICTIONS_TEXT} || '}'
  end)`;
