/**
 * Importing Apache Unomi segment definitions (`metadata { id, name, scope, description }` plus
 * `condition`) as a brand's segments: each is created or updated by its Unomi id, or refused
 * with its reasons. Unomi's scope is ignored: the brand's is the only one.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { DomainError } from "../errors.ts";
import { segmentCondition } from "./caller_condition.ts";
import { createSegment, getSegment, segmentId, updateSegment } from "./segments.ts";

/** What happened to one definition of the file. */
export type SegmentImportOutcome =
  | { index: number; unomiId: string; id: string; status: "created" | "updated" }
  | { index: number; unomiId: string | null; status: "refused"; reasons: string[] };

/** The answer of an import: counts, then one outcome per definition in file order. */
export interface SegmentImportResult {
  scope: string;
  created: number;
  updated: number;
  refused: number;
  segments: SegmentImportOutcome[];
}

const _MAX_NAME = 200;

function _isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Imports Unomi segment definitions (one object, or an array of them) into the scope's segments,
 * each on its own: a definition whose id maps to an existing segment updates it (condition, name,
 * description), else it is created. A definition is refused, and the others still land, when its
 * metadata or condition is not usable; a storage failure throws.
 */
export async function importUnomiSegments(
  sql: Sql,
  input: { scope: string; definitions: unknown; now: Date },
): Promise<SegmentImportResult> {
  const list = Array.isArray(input.definitions) ? input.definitions : [input.definitions];
  const result: SegmentImportResult = {
    scope: input.scope,
    created: 0,
    updated: 0,
    refused: 0,
    segments: [],
  };
  for (const [index, definition] of list.entries()) {
    const path = Array.isArray(input.definitions) ? `$[${index}]` : "$";
    const outcome = await _importOne(sql, input.scope, definition, path, index, input.now);
    result[outcome.status] += 1;
    result.segments.push(outcome);
  }
  return result;
}

async function _importOne(
  sql: Sql,
  scope: string,
  definition: unknown,
  path: string,
  index: number,
  now: Date,
): Promise<SegmentImportOutcome> {
  const reasons: string[] = [];
  const metadata = _isObject(definition) ? definition.metadata : undefined;
  const unomiId = _isObject(metadata) && typeof metadata.id === "string" && metadata.id !== ""
    ? metadata.id
    : null;
  if (!_isObject(definition)) reasons.push(`${path}: must be a Unomi segment object`);
  else if (!_isObject(metadata)) reasons.push(`${path}.metadata: is required (an object)`);
  else {
    if (unomiId === null) reasons.push(`${path}.metadata.id: is required (a non-empty string)`);
    for (const key of ["name", "description"]) {
      const value = metadata[key];
      if (value !== undefined && value !== null && typeof value !== "string") {
        reasons.push(`${path}.metadata.${key}: must be a string`);
      } else if (typeof value === "string" && value.length > _MAX_NAME && key === "name") {
        reasons.push(`${path}.metadata.name: must be at most ${_MAX_NAME} characters`);
      }
    }
  }
  let id: string | null = null;
  if (unomiId !== null) {
    try {
      id = segmentId(scope, unomiId);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      reasons.push(`${path}.metadata.id: ${err.message}`);
    }
  }
  let condition;
  if (_isObject(definition)) {
    try {
      condition = segmentCondition(definition.condition, `${path}.condition`);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      reasons.push(
        err.kind === "invalid_condition" ? err.message : `${path}.condition: ${err.message}`,
      );
    }
  }
  if (reasons.length > 0 || id === null || condition === undefined || !_isObject(metadata)) {
    return { index, unomiId, status: "refused", reasons };
  }
  const name = typeof metadata.name === "string" && metadata.name.trim() !== ""
    ? metadata.name
    : unomiId!;
  const description = typeof metadata.description === "string" ? metadata.description : undefined;
  const segment = { scope, id, name, description, condition, now };
  if (await getSegment(sql, scope, id)) {
    await updateSegment(sql, segment);
    return { index, unomiId: unomiId!, id, status: "updated" };
  }
  try {
    await createSegment(sql, segment);
    return { index, unomiId: unomiId!, id, status: "created" };
  } catch (err) {
    // Created meanwhile (by the API): this definition still wins, as an update.
    if (!(err instanceof DomainError) || err.kind !== "conflict") throw err;
    await updateSegment(sql, segment);
    return { index, unomiId: unomiId!, id, status: "updated" };
  }
}
