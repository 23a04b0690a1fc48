/**
 * Ingest: the path of an event from the HTTP edge to the engine. This group owns edge
 * validation (this module), `acceptEvents`, the one call every ingest door makes (accept.ts),
 * the ingest queue port with its backlog and dead letters (queue.ts: Deno KV's queue; outbox.ts:
 * the outbox for Deno Deploy), the checks of what storage would refuse (storable.ts) and the
 * forwarder's handling of queued batches (forwarder.ts; workers/forwarder.ts is only its process
 * entry). See docs/architecture.md and docs/operations.md.
 *
 * @module
 */
import { z } from "zod";
import type { IngestEvent } from "../engine/engine.ts";
import { DomainError } from "../errors.ts";
import { decodeUtf8Body } from "../utf8.ts";
import { MAX_STORED_EVENT_BYTES, storedSizeBound, storedSizeBoundWith } from "./queue.ts";
import { jsonPath, parseJsonExact, unstorableValues } from "./storable.ts";

/** Events per batch. */
export const MAX_ASYNC_BATCH = 50;
export const MAX_SYNC_BATCH = 10;
/** Request body limit of POST /cdp/events. */
export const MAX_INGEST_BODY_BYTES = 256 * 1024;
/**
 * One event's JSON size limit (as Segment's). It keeps every event within one Deno KV queue
 * message (64 KiB) whatever its characters.
 */
export const MAX_EVENT_BYTES = 32 * 1024;

/** How deep a batch may nest objects and arrays. */
export const MAX_NESTING = 32;

/** Keys a caller may never send: the scope is bound to the credential. */
const _SCOPE_KEYS = new Set(["scope", "shopDomain", "source"]);

const _EVENT_TYPE = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

// The engine stores an event's time as the UTC instant's ISO 8601 text, which PostgreSQL reads
// for years 0001 to 9999 only (year 0000 and six-digit years are refused): a four-digit year
// with an offset can cross either end.
const _MIN_TIME = Date.parse("0001-01-01T00:00:00Z");
const _MAX_TIME = Date.parse("9999-12-31T23:59:59.999Z");
const _TIME_RANGE = "must lie, in UTC, between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z";

/**
 * False for a date-time whose UTC instant lies outside years 0001 to 9999, which storage refuses;
 * true otherwise (text that is no date-time is the format check's to refuse).
 */
export function isStorableTimeStamp(value: string): boolean {
  // Only a year of 0000, 0001 or 9999 can be out of range once its offset is applied.
  if (value >= "0002" && value < "9999") return true;
  const time = Date.parse(value);
  return Number.isNaN(time) || (time >= _MIN_TIME && time <= _MAX_TIME);
}

const _id = z.string().min(1).max(60).refine((s) => !s.includes(":"), "must not contain ':'");
const _object = z.record(z.string(), z.unknown());

/** One event of a batch, strictly. */
export const IngestEventSchema = z.strictObject({
  eventType: z.string().regex(
    _EVENT_TYPE,
    "must start with a letter, then letters, digits or underscores; at most 64 characters",
  ),
  profileId: _id,
  sessionId: _id.optional(),
  properties: _object.optional(),
  flattenedProperties: _object.optional(),
  timeStamp: z.iso.datetime({ offset: true }).refine(isStorableTimeStamp, _TIME_RANGE).optional(),
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

/** A per-event rejection (`rejected[]` of the ingest answer). */
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
 * Validates a parsed body. Batch-level problems throw a DomainError (`invalid_input`,
 * `batch_too_large`, or `sync_batch_too_large` for a `sync` batch, `scope_binding`); per-event
 * problems become rejections while the valid events are accepted, each with a new server id.
 */
export function validateBatch(
  input: JsonBody,
  options: {
    maxEvents: number;
    /** A batch applied inline (`?sync=true`), whose bound is its own. */
    sync?: boolean;
    newId: () => string;
    /**
     * Further checks; `field` names where the problem is (default: by the message). A queued
     * batch's must include the engine's `checkEvent`: acceptEvents marks its events checked, and
     * the forwarder does not check them again under the same event registry.
     */
    check?: (event: IngestEvent) => { error: string; field?: string } | null;
  },
): { accepted: AcceptedEvent[]; rejected: Rejection[] } {
  const body = input.value;
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new DomainError("invalid_input", "body must be a JSON object { events: [...] }");
  }
  // The exact walk (paths, ordering, the nesting error) runs only when the cheap one finds
  // something: building path arrays for every node is costly on the hot path.
  const bound = _isCleanTree(body, 0) ? [] : scopeBindingPaths(body);
  if (bound.length > 0) {
    throw new DomainError(
      "scope_binding",
      `scope is bound to the API key; remove ${bound.slice(0, 20).join(", ")}${
        bound.length > 20 ? ` and ${bound.length - 20} more` : ""
      }`,
    );
  }
  const extra = Object.keys(body).filter((key) => key !== "events");
  if (extra.length > 0) {
    throw new DomainError(
      "invalid_input",
      `unknown body field: ${extra.map((k) => `$.${k}`).join(", ")}`,
    );
  }
  const events = (body as { events?: unknown }).events;
  if (!Array.isArray(events)) throw new DomainError("invalid_input", "$.events must be an array");
  if (events.length === 0) throw new DomainError("invalid_input", "$.events must not be empty");
  if (events.length > options.maxEvents) {
    throw new DomainError(
      options.sync ? "sync_batch_too_large" : "batch_too_large",
      `at most ${options.maxEvents} events per batch; got ${events.length}`,
    );
  }
  const accepted: AcceptedEvent[] = [];
  const rejected: Rejection[] = [];
  // Sizing each event (its JSON and a scan of it) is costly on the hot path; one scan of the
  // body usually vouches for all of them at once. Two native scans of the text find `\u` escapes
  // and numbers to look at closely: both rare, and sizing and the storage checks share them.
  const escapes = input.text.includes("\\u");
  const numbers = _NUMBERS.test(input.text);
  const share = _sizeShare(input, events.length, escapes || numbers);
  // Values storage refuses are rare too: only a body that may hold one is read again, exactly,
  // and walked. Text decoded from bytes is always well-formed; a caller's own may not be.
  const exact = (escapes && _ESCAPES.test(input.text)) || numbers || !input.text.isWellFormed()
    ? _exactEvents(input, events)
    : undefined;
  events.forEach((raw, index) => {
    const unstorable = exact === undefined ? [] : unstorableValues(exact[index], ["events", index]);
    const parsed = IngestEventSchema.safeParse(raw);
    if (!parsed.success || unstorable.length > 0) {
      rejected.push({
        index,
        errors: [
          ...unstorable,
          ...(parsed.success ? [] : parsed.error.issues).map((issue) => ({
            path: jsonPath(["events", index, ...issue.path]),
            message: issue.message,
          })),
        ],
      });
      return;
    }
    const data = keepProtoKeys(raw, parsed.data);
    // JSON bytes are the documented limit; the stored size (numbers take 9 bytes) must also fit
    // one queue message, or a valid event could never be queued.
    const sized = share === null ? _sized(data) : null;
    if (sized === undefined) {
      rejected.push({
        index,
        errors: [{
          path: jsonPath(["events", index]),
          message: `event exceeds ${MAX_EVENT_BYTES} bytes`,
        }],
      });
      return;
    }
    const event: IngestEvent = { id: options.newId(), ...data };
    // Sizing the whole event again with its id would be costly on the hot path.
    const storedBytes = sized === null
      ? share!
      : storedSizeBoundWith(sized.stored, sized.length, `"id":${JSON.stringify(event.id)},`);
    const problem = options.check?.(event);
    if (problem) rejected.push(_problem(index, problem));
    else accepted.push({ index, event, storedBytes });
  });
  return { accepted, rejected };
}

/**
 * The edge's checks for events a door built itself from another spec's messages (the Segment
 * and Shopify pixel doors): values storage refuses, the per-event size limit and `check` (the
 * engine's `checkEvent`). Each event keeps the index of the message it came from; rejections'
 * paths are under `$.<container>[index]`.
 */
export function validateBuiltEvents(
  events: { index: number; event: IngestEvent }[],
  check: (event: IngestEvent) => { error: string; field?: string } | null,
  container = "batch",
): { accepted: AcceptedEvent[]; rejected: Rejection[] } {
  const accepted: AcceptedEvent[] = [];
  const rejected: Rejection[] = [];
  for (const { index, event } of events) {
    const json = JSON.stringify(event);
    // JSON.stringify writes a NUL or an unpaired surrogate, in a value or a key, as a `\u`
    // escape: without one the walk has nothing to find (built events hold no parseJsonExact
    // numbers, the walk's other finding).
    const unstorable = json.includes("\\u") ? unstorableValues(event, [container, index]) : [];
    if (unstorable.length > 0) {
      rejected.push({ index, errors: unstorable });
      continue;
    }
    const sized = _sized(event, json);
    if (sized === undefined) {
      rejected.push({
        index,
        errors: [{
          path: jsonPath([container, index]),
          message: `event exceeds ${MAX_EVENT_BYTES} bytes`,
        }],
      });
      continue;
    }
    const problem = check(event);
    if (problem) {
      rejected.push({
        index,
        errors: [{ path: jsonPath([container, index]), message: problem.error }],
      });
    } else accepted.push({ index, event, storedBytes: sized.stored });
  }
  return { accepted, rejected };
}

/** An event's stored-size bound and JSON length; undefined when it is over a limit. */
function _sized(
  data: unknown,
  json = JSON.stringify(data),
): { stored: number; length: number } | undefined {
  const stored = storedSizeBound(data, json);
  return _utf8Length(json) > MAX_EVENT_BYTES || stored > MAX_STORED_EVENT_BYTES
    ? undefined
    : { stored, length: json.length };
}

function _problem(index: number, problem: { error: string; field?: string }): Rejection {
  const field = problem.field ??
    (problem.error.startsWith("no registered schema") ? "eventType" : "properties");
  return { index, errors: [{ path: jsonPath(["events", index, field]), message: problem.error }] };
}

// An event's id member (`"id":"<26-character ULID>",`) at its largest as KV stores it: two
// strings, each at most two bytes a unit and a few of framing. The generic bound's allowances (9
// bytes a digit run, as if a number; 64 a value) do not apply to it, and every byte over the real
// size here is a byte less of events in each queue message.
const _ID_BOUND = 2 * 34 + 8;
// Numbers to look at closely: one written with an exponent (`1e21`) may come out of
// JSON.stringify longer than it came in, and may overflow or underflow; one of 16 or more digits
// (and dots) may not be read exactly. One of at most 15 significant digits without an exponent
// is read exactly and never grows.
const _NUMBERS = /[:,[]\s*-?(?:\d[\d.]{15}|\d+(?:\.\d+)?[eE])/;
// Escapes of a NUL or of a surrogate (paired or not: the walk tells). JSON text cannot hold a raw
// NUL.
const _ESCAPES = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Each event's share of the body's stored-size bound when the body vouches for all of them: its
 * bytes within the per-event JSON limit, every character written as itself, no exponent numbers,
 * and the whole batch with its ids within one queue message. Null when the events must be sized
 * one by one. `unusual`: the body holds `\u` escapes or numbers to look at closely.
 */
function _sizeShare(body: JsonBody, events: number, unusual: boolean): number | null {
  // A `\u` escape can stand for a character that makes KV store its whole string at two bytes a
  // unit, and text decoded leniently (parseJsonBody refuses bytes that are not UTF-8, a caller's
  // own text may not) holds U+FFFD, three bytes in an event's JSON, for one bad byte: the body's
  // own text would then not bound the events'.
  if (body.bytes > MAX_EVENT_BYTES || unusual || body.text.includes("\uFFFD")) return null;
  const bound = storedSizeBound(undefined, body.text) + events * _ID_BOUND;
  return bound <= MAX_STORED_EVENT_BYTES ? Math.ceil(bound / events) : null;
}

// The body's events read again by parseJsonExact (undefined values when its text is not the
// value's, as a test's may be: then only the strings are checked).
function _exactEvents(input: JsonBody, events: unknown[]): unknown[] {
  try {
    const again = (parseJsonExact(input.text) as { events?: unknown })?.events;
    if (Array.isArray(again) && again.length === events.length) return again;
  } catch {
    // Not the value's text: walk the value itself.
  }
  return events;
}

/** An event as {@linkcode IngestEventSchema} parses it (without its server id). */
export type ParsedIngestEvent = z.output<typeof IngestEventSchema>;

/**
 * `parsed` (zod's output for the event `raw`) with each own `__proto__` key of `raw`'s
 * properties, flattenedProperties and target.properties put back as sent. zod's records drop that
 * key (assigning it to a plain object would replace its prototype), which would store less than
 * the answer says was accepted; it is defined here as an own data property, which JSON writes as
 * any other key. Deeper levels are `unknown` values zod returns as they are.
 */
export function keepProtoKeys<T extends ParsedIngestEvent>(raw: unknown, parsed: T): T {
  if (typeof raw !== "object" || raw === null) return parsed;
  const input = raw as Record<string, unknown>;
  _putProtoKey(input.properties, parsed.properties);
  _putProtoKey(input.flattenedProperties, parsed.flattenedProperties);
  const target = input.target;
  if (typeof target === "object" && target !== null) {
    _putProtoKey((target as Record<string, unknown>).properties, parsed.target?.properties);
  }
  return parsed;
}

function _putProtoKey(from: unknown, into: Record<string, unknown> | undefined): void {
  if (into === undefined || typeof from !== "object" || from === null) return;
  const own = Object.getOwnPropertyDescriptor(from, "__proto__");
  if (own === undefined || !("value" in own)) return;
  Object.defineProperty(into, "__proto__", {
    value: own.value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** An event as the queue holds it: an ingest event with its server id. */
const _QueuedEventSchema = IngestEventSchema.extend({ id: z.string().min(1).max(64) });

/**
 * Reads events an operator gives to replace a dead letter's: JSON text holding an array of
 * events with their ids, or an object with such an `events` array (as `deadletter show` prints
 * one). Each must pass the edge's checks; throws an Error naming each problem's JSON path.
 */
export function parseQueuedEvents(text: string): IngestEvent[] {
  let value: unknown;
  try {
    value = parseJsonExact(text);
  } catch {
    throw new Error("the events are not valid JSON");
  }
  const inObject = typeof value === "object" && value !== null && !Array.isArray(value);
  const events = inObject ? (value as { events?: unknown }).events : value;
  const base = inObject ? ["events"] : [];
  if (!Array.isArray(events)) {
    throw new Error("give a JSON array of events, or an object with an events array");
  }
  const problems = scopeBindingPaths(events).map((path) => ({
    path: path.replace(/^\$/, jsonPath(base)),
    message: "scope is bound to the brand; remove it",
  }));
  const parsed = events.map((event, index) => {
    const path = [...base, index];
    problems.push(...unstorableValues(event, path));
    const result = _QueuedEventSchema.safeParse(event);
    if (result.success) return keepProtoKeys(event, result.data);
    for (const issue of result.error.issues) {
      problems.push({ path: jsonPath([...path, ...issue.path]), message: issue.message });
    }
    return undefined;
  });
  if (problems.length > 0) {
    throw new Error(problems.map((p) => `${p.path}: ${p.message}`).join("; "));
  }
  return parsed as IngestEvent[];
}

/** An ingest request's body: its JSON value, its text and its size in bytes. */
export interface JsonBody {
  value: unknown;
  text: string;
  bytes: number;
}

/** Parses a request body (its bytes) as JSON; 400 `bad_request` when it is not UTF-8 JSON. */
export function parseJsonBody(bytes: Uint8Array | null): JsonBody {
  const text = bytes ? decodeUtf8Body(bytes) : "";
  try {
    return { value: JSON.parse(text), text, bytes: bytes?.byteLength ?? 0 };
  } catch {
    throw new DomainError("invalid_input", "body is not valid JSON");
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
      throw new DomainError(
        "invalid_input",
        `nesting deeper than ${MAX_NESTING} levels at ${jsonPath(path)}`,
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
        if (_SCOPE_KEYS.has(key)) found.push(jsonPath([...path, key]));
      }
    }
  }
  return found;
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
