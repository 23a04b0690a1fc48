import { z } from "zod";
import type { AppDeps } from "./app_env.ts";
import type { EventBatch, IngestEvent } from "./engine/engine.ts";
import { type ErrorCode, HttpError } from "./errors.ts";
import type { GroupCommit } from "./kv_group_commit.ts";
import {
  enqueueBatch,
  MAX_STORED_EVENT_BYTES,
  storedSizeBound,
  storedSizeBoundWith,
} from "./ingest_queue.ts";

/** Events per batch (spec section 8). */
export const MAX_ASYNC_BATCH = 50;
export const MAX_SYNC_BATCH = 10;
/** Request body limit of POST /cdp/events (spec section 8). */
export const MAX_INGEST_BODY_BYTES = 256 * 1024;
/**
 * One event's JSON size limit (as Segment's). It keeps every event within one Deno KV queue
 * message (64 KiB) whatever its characters.
 */
export const MAX_EVENT_BYTES = 32 * 1024;

/** How deep a batch may nest objects and arrays. */
export const MAX_NESTING = 32;

/** Keys a caller may never send: the scope is bound to the credential (spec 2.1, 4.1.5). */
const _SCOPE_KEYS = new Set(["scope", "shopDomain", "source"]);

// What the hand-written fast path (`parseIngestEvent`) tests, as the schema does: its own
// eventType pattern, and the pattern zod builds for `z.iso.datetime({ offset: true })`.
const _EVENT_TYPE = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
const _DATETIME = z.regexes.datetime({ offset: true });
const _EVENT_KEYS = new Set([
  "eventType",
  "profileId",
  "sessionId",
  "properties",
  "flattenedProperties",
  "timeStamp",
  "target",
]);
const _TARGET_KEYS = new Set(["itemId", "itemType", "properties"]);

const _id = z.string().min(1).max(60).refine((s) => !s.includes(":"), "must not contain ':'");
const _object = z.record(z.string(), z.unknown());

/** One event of a batch, strictly (spec 2.1). */
export const IngestEventSchema = z.strictObject({
  eventType: z.string().regex(
    _EVENT_TYPE,
    "must start with a letter, then letters, digits or underscores; at most 64 characters",
  ),
  profileId: _id,
  sessionId: _id.optional(),
  properties: _object.optional(),
  flattenedProperties: _object.optional(),
  timeStamp: z.iso.datetime({ offset: true }).optional(),
  target: z.strictObject({
    itemId: z.string().min(1).max(255),
    itemType: z.string().min(1).max(64),
    properties: _object.optional(),
  }).optional(),
});

/** The request body (for the OpenAPI document; events are validated one by one). */
export const IngestBodySchema = z.strictObject({
  events: z.array(IngestEventSchema).min(1).max(MAX_ASYNC_BATCH),
});

/** A per-event rejection of spec 4.1 (`rejected[]`). */
export interface Rejection {
  index: number;
  errors: { path: string; message: string }[];
}

/** An accepted event and its position in the request. */
export interface AcceptedEvent {
  index: number;
  event: IngestEvent;
  /** An upper bound of its stored size (or its share of one for the batch), for chunking. */
  storedBytes: number;
}

/**
 * Validates a parsed body. Batch-level problems throw (400 `bad_request`, `batch_too_large`,
 * `sync_batch_too_large`, `scope_binding`); per-event problems become rejections while the
 * valid events are accepted, each with a new server id.
 */
export function validateBatch(
  input: JsonBody,
  options: {
    maxEvents: number;
    tooLargeCode: ErrorCode;
    newId: () => string;
    /** Further checks; `field` names where the problem is (default: by the message). */
    check?: (event: IngestEvent) => { error: string; field?: string } | null;
  },
): { accepted: AcceptedEvent[]; rejected: Rejection[] } {
  const body = input.value;
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new HttpError(400, "bad_request", "body must be a JSON object { events: [...] }");
  }
  // The exact walk (paths, ordering, the nesting error) runs only when the cheap one finds
  // something: building path arrays for every node cost ~3% of the edge's CPU.
  const bound = _isCleanTree(body, 0) ? [] : scopeBindingPaths(body);
  if (bound.length > 0) {
    throw new HttpError(
      400,
      "scope_binding",
      `scope is bound to the API key; remove ${bound.slice(0, 20).join(", ")}${
        bound.length > 20 ? ` and ${bound.length - 20} more` : ""
      }`,
    );
  }
  const extra = Object.keys(body).filter((key) => key !== "events");
  if (extra.length > 0) {
    throw new HttpError(
      400,
      "bad_request",
      `unknown body field: ${extra.map((k) => `$.${k}`).join(", ")}`,
    );
  }
  const events = (body as { events?: unknown }).events;
  if (!Array.isArray(events)) throw new HttpError(400, "bad_request", "$.events must be an array");
  if (events.length === 0) throw new HttpError(400, "bad_request", "$.events must not be empty");
  if (events.length > options.maxEvents) {
    throw new HttpError(
      400,
      options.tooLargeCode,
      `at most ${options.maxEvents} events per batch; got ${events.length}`,
    );
  }
  const accepted: AcceptedEvent[] = [];
  const rejected: Rejection[] = [];
  // Sizing each event (its JSON and a scan of it) cost ~8% of the edge's CPU; one scan of the
  // body usually vouches for all of them at once.
  const share = _sizeShare(input, events.length);
  events.forEach((raw, index) => {
    let data = parseIngestEvent(raw);
    if (data === undefined) {
      // zod decides what the fast path declined, so its messages name the problems.
      const parsed = IngestEventSchema.safeParse(raw);
      if (!parsed.success) {
        rejected.push({
          index,
          errors: parsed.error.issues.map((issue) => ({
            path: _jsonPath(["events", index, ...issue.path]),
            message: issue.message,
          })),
        });
        return;
      }
      data = parsed.data;
    }
    // JSON bytes are the documented limit; the stored size (numbers take 9 bytes) must also fit
    // one queue message, or a valid event could never be queued.
    const sized = share === null ? _sized(data) : null;
    if (sized === undefined) {
      rejected.push({
        index,
        errors: [{
          path: _jsonPath(["events", index]),
          message: `event exceeds ${MAX_EVENT_BYTES} bytes`,
        }],
      });
      return;
    }
    const event: IngestEvent = { id: options.newId(), ...data };
    // Sizing the whole event again with its id cost ~4% of the edge's CPU.
    const storedBytes = sized === null
      ? share!
      : storedSizeBoundWith(sized.stored, sized.length, `"id":${JSON.stringify(event.id)},`);
    const problem = options.check?.(event);
    if (problem) rejected.push(_problem(index, problem));
    else accepted.push({ index, event, storedBytes });
  });
  return { accepted, rejected };
}

/** An event's stored-size bound and JSON length; undefined when it is over a limit. */
function _sized(data: unknown): { stored: number; length: number } | undefined {
  const json = JSON.stringify(data);
  const stored = storedSizeBound(data, json);
  return _utf8Length(json) > MAX_EVENT_BYTES || stored > MAX_STORED_EVENT_BYTES
    ? undefined
    : { stored, length: json.length };
}

function _problem(index: number, problem: { error: string; field?: string }): Rejection {
  const field = problem.field ??
    (problem.error.startsWith("no registered schema") ? "eventType" : "properties");
  return { index, errors: [{ path: _jsonPath(["events", index, field]), message: problem.error }] };
}

// An event's id member (`"id":"<26-character ULID>",`) at its largest as KV stores it.
const _ID_BOUND = 2 * 34 + 9 * 13 + 64;
// A number written with an exponent (`1e21`) may come out of JSON.stringify longer than it came
// in; without one, an event's JSON is never longer than its text in the body.
const _EXPONENT = /[:,[]\s*-?\d+(\.\d+)?[eE]/;

/**
 * Each event's share of the body's stored-size bound when the body vouches for all of them: its
 * bytes within the per-event JSON limit, every character written as itself, no exponent numbers,
 * and the whole batch with its ids within one queue message. Null when the events must be sized
 * one by one.
 */
function _sizeShare(body: JsonBody, events: number): number | null {
  // A `\u` escape can stand for a character that makes KV store its whole string at two bytes a
  // unit, and a byte that is not UTF-8 decodes to U+FFFD, three bytes in an event's JSON: the
  // body's own text would then not bound the events'.
  if (
    body.bytes > MAX_EVENT_BYTES || _EXPONENT.test(body.text) || body.text.includes("\\u") ||
    body.text.includes("\uFFFD")
  ) return null;
  const bound = storedSizeBound(undefined, body.text) + events * _ID_BOUND;
  return bound <= MAX_STORED_EVENT_BYTES ? Math.ceil(bound / events) : null;
}

/** An event as {@linkcode IngestEventSchema} parses it (without its server id). */
export type ParsedIngestEvent = z.output<typeof IngestEventSchema>;

/**
 * The common event shape, checked by hand: what {@linkcode IngestEventSchema} would output for
 * `raw`, or undefined when this cannot tell (invalid, or unusual: then ask the schema). zod
 * cost ~10% of the edge's CPU; tests/lib/ingest_test.ts runs both over a corpus of events.
 */
export function parseIngestEvent(raw: unknown): ParsedIngestEvent | undefined {
  if (!_isPlainJsonObject(raw)) return undefined;
  for (const key in raw) {
    // A present key holding undefined is kept by zod (optional fields): leave that to it.
    if (!_EVENT_KEYS.has(key) || raw[key] === undefined) return undefined;
  }
  const { eventType, profileId, sessionId, properties, flattenedProperties, timeStamp, target } =
    raw;
  if (typeof eventType !== "string" || !_EVENT_TYPE.test(eventType)) return undefined;
  if (!_isId(profileId)) return undefined;
  // Built in the schema's key order, as zod builds its output.
  const event: ParsedIngestEvent = { eventType, profileId };
  if (sessionId !== undefined) {
    if (!_isId(sessionId)) return undefined;
    event.sessionId = sessionId;
  }
  if (properties !== undefined) {
    const copy = _copyRecord(properties);
    if (copy === undefined) return undefined;
    event.properties = copy;
  }
  if (flattenedProperties !== undefined) {
    const copy = _copyRecord(flattenedProperties);
    if (copy === undefined) return undefined;
    event.flattenedProperties = copy;
  }
  if (timeStamp !== undefined) {
    if (typeof timeStamp !== "string" || !_DATETIME.test(timeStamp)) return undefined;
    event.timeStamp = timeStamp;
  }
  if (target !== undefined) {
    if (!_isPlainJsonObject(target)) return undefined;
    for (const key in target) {
      if (!_TARGET_KEYS.has(key) || target[key] === undefined) return undefined;
    }
    const { itemId, itemType, properties } = target;
    if (!_isShortString(itemId, 255) || !_isShortString(itemType, 64)) return undefined;
    if (properties === undefined) {
      event.target = { itemId, itemType };
    } else {
      const copy = _copyRecord(properties);
      if (copy === undefined) return undefined;
      event.target = { itemId, itemType, properties: copy };
    }
  }
  return event;
}

/** An ingest request's body: its JSON value, its text and its size in bytes. */
export interface JsonBody {
  value: unknown;
  text: string;
  bytes: number;
}

/** Parses a request body (its bytes) as JSON; 400 `bad_request` when it is not. */
export function parseJsonBody(bytes: Uint8Array | null): JsonBody {
  const text = bytes ? _decoder.decode(bytes) : "";
  try {
    return { value: JSON.parse(text), text, bytes: bytes?.byteLength ?? 0 };
  } catch {
    throw new HttpError(400, "bad_request", "body is not valid JSON");
  }
}

const _decoder = new TextDecoder();

/**
 * Queues a batch of accepted events; 503 `service_unavailable` (nothing accepted) on failure.
 * `also` joins the queue's commit (only when the queue lives in `deps.kv`); returns true when
 * it did, i.e. something was committed with it.
 */
export async function queueBatch(
  deps: Pick<AppDeps, "kv" | "queueKv" | "newId" | "config">,
  input: {
    brandId: string;
    batch: EventBatch;
    /** The group commit over the queue's KV database. */
    commit: GroupCommit;
    also?: (op: Deno.AtomicOperation) => void;
    sizes?: number[];
  },
): Promise<boolean> {
  if (input.batch.events.length === 0) return false;
  const kv = deps.queueKv ?? deps.kv;
  const folded = input.also !== undefined && kv === deps.kv;
  try {
    await enqueueBatch(kv, {
      brandId: input.brandId,
      batch: input.batch,
      newId: deps.newId,
      backoffMs: deps.config.ingestRetryBackoffMs,
      also: folded ? input.also : undefined,
      sizes: input.sizes,
      commit: input.commit,
    });
    return folded;
  } catch (err) {
    throw new HttpError(
      503,
      "service_unavailable",
      "the ingest queue is unavailable; no events were accepted, retry the batch",
      { cause: err },
    );
  }
}

/**
 * JSON paths of every `scope`, `shopDomain` or `source` key anywhere in a value. Walks without
 * recursion and refuses (400) nesting deeper than {@linkcode MAX_NESTING}, so a small body of
 * nested brackets cannot exhaust the stack.
 */
export function scopeBindingPaths(value: unknown): string[] {
  const found: string[] = [];
  const stack: { node: unknown; path: (string | number)[] }[] = [{ node: value, path: [] }];
  while (stack.length > 0) {
    const { node, path } = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    if (path.length > MAX_NESTING) {
      throw new HttpError(
        400,
        "bad_request",
        `nesting deeper than ${MAX_NESTING} levels at ${_jsonPath(path)}`,
      );
    }
    const children: [string | number, unknown][] = Array.isArray(node)
      ? node.map((child, i) => [i, child])
      : Object.entries(node);
    for (let i = children.length - 1; i >= 0; i--) {
      const [key, child] = children[i]!;
      stack.push({ node: child, path: [...path, key] });
    }
    if (!Array.isArray(node)) {
      for (const key of Object.keys(node)) {
        if (_SCOPE_KEYS.has(key)) found.push(_jsonPath([...path, key]));
      }
    }
  }
  return found;
}

// Objects as JSON.parse makes them; others (class instances, null prototypes) go to zod.
function _isPlainJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null &&
    Object.getPrototypeOf(value) === Object.prototype;
}

// zod measures a string over its maximum in code points: past it in UTF-16 units, let it decide.
function _isShortString(value: unknown, max: number): value is string {
  return typeof value === "string" && value.length >= 1 && value.length <= max;
}

function _isId(value: unknown): value is string {
  return _isShortString(value, 60) && !value.includes(":");
}

// `z.record(z.string(), z.unknown())`'s output: a shallow copy. A `__proto__` key (which zod
// drops), an own `constructor` (its plain-object test reads it) or a symbol key: zod decides.
function _copyRecord(value: unknown): Record<string, unknown> | undefined {
  if (
    !_isPlainJsonObject(value) || Object.hasOwn(value, "__proto__") ||
    Object.hasOwn(value, "constructor") || Object.getOwnPropertySymbols(value).length > 0
  ) {
    return undefined;
  }
  return { ...value };
}

// True when no object in `node` has a scope key or nests deeper than MAX_NESTING: the common
// case, without building paths. Recursion is bounded: it stops past MAX_NESTING levels.
function _isCleanTree(node: unknown, depth: number): boolean {
  if (typeof node !== "object" || node === null) return true;
  if (depth > MAX_NESTING) return false;
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      if (!_isCleanTree(node[i], depth + 1)) return false;
    }
    return true;
  }
  // for...in would also see inherited keys, which scopeBindingPaths does not walk.
  if (Object.getPrototypeOf(node) !== Object.prototype) return false;
  for (const key in node) {
    if (_SCOPE_KEYS.has(key)) return false;
    if (!_isCleanTree((node as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

function _utf8Length(text: string): number {
  // At most 3 bytes per UTF-16 unit: short text needs no count (most events are far under).
  if (text.length * 3 <= MAX_EVENT_BYTES) return text.length;
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

function _jsonPath(path: PropertyKey[]): string {
  return "$" +
    path.map((p) =>
      typeof p === "number"
        ? `[${p}]`
        : /^[A-Za-z_$][\w$]*$/.test(String(p))
        ? `.${String(p)}`
        : `[${JSON.stringify(String(p))}]`
    ).join("");
}
