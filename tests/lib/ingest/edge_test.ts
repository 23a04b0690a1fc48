import assert from "node:assert/strict";
import { serialize } from "node:v8";
import type { IngestEvent } from "../../../lib/engine/engine.ts";
import { DomainError } from "../../../lib/errors.ts";
import { type ErrorCode, type HttpError, toHttpError } from "../../../lib/http/errors.ts";
import {
  IngestEventSchema,
  type JsonBody,
  keepProtoKeys,
  MAX_ASYNC_BATCH,
  MAX_EVENT_BYTES,
  MAX_SYNC_BATCH,
  parseJsonBody,
  parseQueuedEvents,
  scopeBindingPaths,
  validateBatch,
  validateBuiltEvents,
} from "../../../lib/ingest/edge.ts";
import { MAX_STORED_EVENT_BYTES, storedSizeBound } from "../../../lib/ingest/queue.ts";

type Options = Parameters<typeof validateBatch>[1];

/** A counter id source, so tests can see how many ids were taken and in which order. */
function counter() {
  let n = 0;
  return {
    newId: () => `id-${++n}`,
    get taken() {
      return n;
    },
  };
}

/** A body as `parseJsonBody` reads it; `text` defaults to the value's JSON. */
function body(value: unknown, text = JSON.stringify(value) ?? ""): JsonBody {
  return { value, text, bytes: new TextEncoder().encode(text).byteLength };
}

function validate(value: unknown, options: Partial<Options> = {}) {
  return validateBatch(body(value), {
    maxEvents: MAX_ASYNC_BATCH,
    newId: counter().newId,
    ...options,
  });
}

/** A valid raw event; `fields` overrides or adds fields. */
function ev(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { eventType: "page_viewed", profileId: "p1", ...fields };
}

/** Validates a one-event batch and returns its rejection errors ([] when accepted). */
function errorsOf(event: unknown): { path: string; message: string }[] {
  const { accepted, rejected } = validate({ events: [event] });
  assert.equal(accepted.length + rejected.length, 1);
  return rejected[0]?.errors ?? [];
}

function assertAccepted(event: unknown, label = JSON.stringify(event)) {
  assert.deepEqual(errorsOf(event), [], label);
}

function assertRejectedAt(event: unknown, path: string, label = JSON.stringify(event)) {
  const errors = errorsOf(event);
  assert.ok(errors.length > 0, `expected a rejection: ${label}`);
  assert.ok(
    errors.some((e) => e.path === path),
    `expected ${path} in ${JSON.stringify(errors)}: ${label}`,
  );
  for (const e of errors) assert.equal(typeof e.message, "string");
}

/** Asserts `fn` throws a DomainError the edge answers with that status and code; returns that. */
function assertHttpError(fn: () => unknown, code: ErrorCode, status = 400): HttpError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof DomainError, `expected a DomainError, got ${caught}`);
  const answer = toHttpError(caught);
  assert.equal(answer.status, status);
  assert.equal(answer.code, code);
  return answer;
}

// --- batch-level errors ---

Deno.test("validateBatch: a body that is not a JSON object is 400 bad_request", () => {
  for (const body of [null, undefined, [], [ev()], "events", "", 42, 0, true]) {
    assertHttpError(() => validate(body), "bad_request");
  }
});

Deno.test("validateBatch: events missing, not an array, or empty is 400 bad_request", () => {
  for (const body of [{}, { events: null }, { events: {} }, { events: "x" }, { events: 1 }]) {
    const err = assertHttpError(() => validate(body), "bad_request");
    assert.match(err.message, /\$\.events must be an array/);
  }
  const err = assertHttpError(() => validate({ events: [] }), "bad_request");
  assert.match(err.message, /\$\.events must not be empty/);
});

Deno.test("validateBatch: an extra top-level field is 400 bad_request naming its path", () => {
  let err = assertHttpError(() => validate({ events: [ev()], extra: 1 }), "bad_request");
  assert.match(err.message, /\$\.extra\b/);
  err = assertHttpError(() => validate({ events: [ev()], a: 1, b: 2 }), "bad_request");
  assert.match(err.message, /\$\.a, \$\.b/);
  // Even without events, the unknown field is named.
  err = assertHttpError(() => validate({ batch: [ev()] }), "bad_request");
  assert.match(err.message, /\$\.batch/);
});

Deno.test("validateBatch: more events than maxEvents is 400 with the given code; the limit itself is fine", () => {
  const events = (n: number) => Array.from({ length: n }, () => ev());
  assert.equal(validate({ events: events(MAX_ASYNC_BATCH) }).accepted.length, MAX_ASYNC_BATCH);
  let err = assertHttpError(
    () => validate({ events: events(MAX_ASYNC_BATCH + 1) }),
    "batch_too_large",
  );
  assert.match(err.message, new RegExp(`${MAX_ASYNC_BATCH}.*${MAX_ASYNC_BATCH + 1}`));

  const sync = { maxEvents: MAX_SYNC_BATCH, sync: true } as const;
  assert.equal(validate({ events: events(MAX_SYNC_BATCH) }, sync).accepted.length, 10);
  err = assertHttpError(
    () => validate({ events: events(MAX_SYNC_BATCH + 1) }, sync),
    "sync_batch_too_large",
  );
  assert.match(err.message, /at most 10 events per batch; got 11/);
});

Deno.test("validateBatch: a too-large batch takes no ids", () => {
  const ids = counter();
  assertHttpError(
    () => validate({ events: Array.from({ length: 51 }, () => ev()) }, { newId: ids.newId }),
    "batch_too_large",
  );
  assert.equal(ids.taken, 0);
});

// --- scope binding ---

Deno.test("scopeBindingPaths: finds scope, shopDomain and source anywhere, at any depth", () => {
  const body = {
    scope: "acme.myshopify.com",
    events: [
      ev(),
      {
        eventType: "page_viewed",
        profileId: "p1",
        shopDomain: "acme.myshopify.com",
        source: { itemId: "x" },
        properties: {
          source: "web",
          nested: { deeper: { list: [1, { scope: "s" }, [{ shopDomain: "d" }]] } },
          "odd key": { scope: 1 },
        },
        flattenedProperties: { scope: "s" },
        target: {
          itemId: "t1",
          itemType: "product",
          scope: "s",
          properties: { shopDomain: "d", a: [{ b: { source: null } }] },
        },
      },
    ],
  };
  assert.deepEqual(
    scopeBindingPaths(body).sort(),
    [
      "$.scope",
      "$.events[1].shopDomain",
      "$.events[1].source",
      "$.events[1].properties.source",
      "$.events[1].properties.nested.deeper.list[1].scope",
      "$.events[1].properties.nested.deeper.list[2][0].shopDomain",
      '$.events[1].properties["odd key"].scope',
      "$.events[1].flattenedProperties.scope",
      "$.events[1].target.scope",
      "$.events[1].target.properties.shopDomain",
      "$.events[1].target.properties.a[0].b.source",
    ].sort(),
  );
});

Deno.test("scopeBindingPaths: a forbidden key inside a forbidden key's value is reported too", () => {
  assert.deepEqual(scopeBindingPaths({ scope: { source: 1 } }), ["$.scope", "$.scope.source"]);
});

Deno.test("scopeBindingPaths: keys that merely contain those words, and values, are allowed", () => {
  const body = {
    events: [ev({
      properties: {
        scoped: true,
        sourceUrl: "https://example.com",
        shopDomainName: "x",
        Scope: "case differs",
        SOURCE: "case differs",
        note: "scope",
        tags: ["source", "shopDomain"],
        my_scope: 1,
      },
      flattenedProperties: { dataSource: "crm" },
      target: { itemId: "scope", itemType: "source" },
    })],
  };
  assert.deepEqual(scopeBindingPaths(body), []);
  assert.equal(validate(body).accepted.length, 1);
});

Deno.test("scopeBindingPaths: non-object values have no paths", () => {
  for (const value of [null, undefined, "scope", 1, true, [], ["scope"]]) {
    assert.deepEqual(scopeBindingPaths(value), []);
  }
});

Deno.test("validateBatch: any scope key is 400 scope_binding naming every path, even a valid shop", () => {
  const body = {
    events: [
      ev({ shopDomain: "acme.myshopify.com" }),
      ev(),
      ev({ properties: { a: [{ scope: "acme.myshopify.com" }] } }),
      ev({ target: { itemId: "i", itemType: "t", properties: { source: "x" } } }),
      ev({ flattenedProperties: { shopDomain: "x" } }),
    ],
  };
  const ids = counter();
  const err = assertHttpError(() => validate(body, { newId: ids.newId }), "scope_binding");
  for (
    const path of [
      "$.events[0].shopDomain",
      "$.events[2].properties.a[0].scope",
      "$.events[3].target.properties.source",
      "$.events[4].flattenedProperties.shopDomain",
    ]
  ) {
    assert.ok(err.message.includes(path), `${path} in ${err.message}`);
  }
  assert.doesNotMatch(err.message, /more/);
  assert.equal(ids.taken, 0);
});

Deno.test("validateBatch: a top-level scope is scope_binding, not an unknown field", () => {
  const err = assertHttpError(() => validate({ events: [ev()], scope: "x" }), "scope_binding");
  assert.match(err.message, /\$\.scope\b/);
});

Deno.test("validateBatch: the scope_binding description lists 20 paths, then 'and N more'", () => {
  const body = { events: Array.from({ length: 25 }, () => ev({ shopDomain: "x" })) };
  const err = assertHttpError(() => validate(body), "scope_binding");
  for (let i = 0; i < 20; i++) {
    assert.ok(err.message.includes(`$.events[${i}].shopDomain`), `event ${i}`);
  }
  for (let i = 20; i < 25; i++) {
    assert.ok(!err.message.includes(`$.events[${i}].shopDomain`), `event ${i} is not listed`);
  }
  assert.ok(err.message.endsWith(" and 5 more"), err.message);
  assert.equal(err.message.match(/\$\.events\[/g)?.length, 20);

  // Exactly 20: all listed, no suffix.
  const twenty = assertHttpError(
    () => validate({ events: Array.from({ length: 20 }, () => ev({ source: "x" })) }),
    "scope_binding",
  );
  assert.equal(twenty.message.match(/\$\.events\[/g)?.length, 20);
  assert.doesNotMatch(twenty.message, /more/);
});

// --- per-event rules ---

Deno.test("validateBatch: eventType starts with a letter, then letters, digits, underscores; max 64", () => {
  for (
    const eventType of ["a", "Z", "page_viewed", "a1_B2", "a".repeat(64), "A" + "_".repeat(63)]
  ) {
    assertAccepted(ev({ eventType }), eventType);
  }
  for (
    const eventType of [
      "a".repeat(65),
      "",
      "1abc",
      "_abc",
      "a-b",
      "a b",
      "a.b",
      "é",
      "abc\n",
      7,
      null,
    ]
  ) {
    assertRejectedAt(ev({ eventType }), "$.events[0].eventType", String(eventType));
  }
  const { eventType: _, ...missing } = ev();
  assertRejectedAt(missing, "$.events[0].eventType");
});

Deno.test("validateBatch: profileId is required, 1 to 60 characters, without ':'", () => {
  for (const profileId of ["p", "x".repeat(60), "store_acme_123", "a-b.c@d"]) {
    assertAccepted(ev({ profileId }), profileId);
  }
  for (const profileId of ["x".repeat(61), "", "a:b", ":", 42, null, ["p"]]) {
    assertRejectedAt(ev({ profileId }), "$.events[0].profileId", String(profileId));
  }
  const { profileId: _, ...missing } = ev();
  assertRejectedAt(missing, "$.events[0].profileId");
});

Deno.test("validateBatch: sessionId is optional, 1 to 60 characters, without ':'", () => {
  assertAccepted(ev());
  for (const sessionId of ["s", "x".repeat(60)]) assertAccepted(ev({ sessionId }), sessionId);
  for (const sessionId of ["x".repeat(61), "", "s:1", 1, null]) {
    assertRejectedAt(ev({ sessionId }), "$.events[0].sessionId", String(sessionId));
  }
});

Deno.test("validateBatch: properties and flattenedProperties must be objects", () => {
  for (const field of ["properties", "flattenedProperties"]) {
    assertAccepted(ev({ [field]: {} }), field);
    assertAccepted(ev({ [field]: { a: 1, b: { c: [null] } } }), field);
    for (const value of [[], [1], "x", 1, true, null]) {
      assertRejectedAt(ev({ [field]: value }), `$.events[0].${field}`, `${field}=${value}`);
    }
  }
});

Deno.test("validateBatch: timeStamp is an ISO 8601 date-time with Z or an offset", () => {
  for (
    const timeStamp of [
      "2026-01-02T03:04:05Z",
      "2026-01-02T03:04:05.123Z",
      "2026-01-02T03:04:05.123+02:00",
      "2026-01-02T03:04:05-05:30",
    ]
  ) {
    assertAccepted(ev({ timeStamp }), timeStamp);
  }
  for (
    const timeStamp of [
      "2026-01-02",
      "yesterday",
      "2026-01-02T03:04:05",
      "2026-13-02T03:04:05Z",
      "",
      1767322800000,
      null,
    ]
  ) {
    assertRejectedAt(ev({ timeStamp }), "$.events[0].timeStamp", String(timeStamp));
  }
});

Deno.test("validateBatch: target is strictly { itemId, itemType, properties? }", () => {
  assertAccepted(ev({ target: { itemId: "i1", itemType: "product" } }));
  assertAccepted(ev({ target: { itemId: "i1", itemType: "product", properties: { a: 1 } } }));
  assertRejectedAt(
    ev({ target: { itemId: "i1", itemType: "product", extra: 1 } }),
    "$.events[0].target",
  );
  assertRejectedAt(ev({ target: { itemType: "product" } }), "$.events[0].target.itemId");
  assertRejectedAt(ev({ target: { itemId: "i1" } }), "$.events[0].target.itemType");
  assertRejectedAt(
    ev({ target: { itemId: "", itemType: "product" } }),
    "$.events[0].target.itemId",
  );
  assertRejectedAt(ev({ target: { itemId: "i", itemType: "" } }), "$.events[0].target.itemType");
  assertRejectedAt(
    ev({ target: { itemId: "i", itemType: "t", properties: [] } }),
    "$.events[0].target.properties",
  );
  for (const target of ["i1", [], null, 1]) {
    assertRejectedAt(ev({ target }), "$.events[0].target", String(target));
  }
});

Deno.test("validateBatch: unknown event fields are rejected at $.events[i], naming the field", () => {
  const { accepted, rejected } = validate({
    events: [ev(), ev({ extraField: 1 }), ev({ itemId: "x", type: "y" })],
  });
  assert.deepEqual(accepted.map((a) => a.index), [0]);
  assert.deepEqual(rejected.map((r) => r.index), [1, 2]);
  assert.equal(rejected[0]!.errors.length, 1);
  assert.equal(rejected[0]!.errors[0]!.path, "$.events[1]");
  assert.match(rejected[0]!.errors[0]!.message, /extraField/);
  assert.ok(rejected[1]!.errors.every((e) => e.path === "$.events[2]"));
  const messages = rejected[1]!.errors.map((e) => e.message).join(" ");
  assert.match(messages, /itemId/);
  assert.match(messages, /type/);
});

Deno.test("validateBatch: a non-object event is rejected at $.events[i]", () => {
  const { accepted, rejected } = validate({ events: [null, "x", 1, [], ev()] });
  assert.deepEqual(accepted.map((a) => a.index), [4]);
  assert.deepEqual(rejected.map((r) => r.index), [0, 1, 2, 3]);
  for (const r of rejected) assert.equal(r.errors[0]!.path, `$.events[${r.index}]`);
});

Deno.test("validateBatch: every problem of an event is reported", () => {
  const errors = errorsOf({ eventType: "1x", profileId: "a:b", sessionId: "", timeStamp: "now" });
  assert.deepEqual(
    errors.map((e) => e.path).sort(),
    [
      "$.events[0].eventType",
      "$.events[0].profileId",
      "$.events[0].sessionId",
      "$.events[0].timeStamp",
    ],
  );
});

// --- what storage cannot hold (NUL, lone surrogates, out-of-range times, inexact numbers) ---

/** Validates a body given as its raw JSON text, as the route reads it from bytes. */
function validateText(text: string) {
  return validateBatch(parseJsonBody(new TextEncoder().encode(text)), {
    maxEvents: MAX_ASYNC_BATCH,
    newId: counter().newId,
  });
}

/** A body's text: `{"events":[...]}` around events given as JSON text. */
function eventsText(...events: string[]): string {
  return `{"events":[${events.join(",")}]}`;
}

const VALID = `{"eventType":"page_viewed","profileId":"p1"}`;

Deno.test("validateBatch: NUL in a string or a key is rejected at its JSON path; the valid events are accepted", () => {
  const { accepted, rejected } = validateText(eventsText(
    VALID,
    String.raw`{"eventType":"page_viewed","profileId":"p1","properties":{"name":"a\u0000b"}}`,
    String
      .raw`{"eventType":"page_viewed","profileId":"p1","properties":{"ok":1,"a\u0000":{"b":[1]}}}`,
    String
      .raw`{"eventType":"page_viewed","profileId":"p\u0000","flattenedProperties":{"x":["\u0000"]},"target":{"itemId":"i","itemType":"t","properties":{"k":"\u0000"}}}`,
    VALID,
  ));
  assert.deepEqual(accepted.map((a) => a.index), [0, 4]);
  assert.deepEqual(rejected, [
    {
      index: 1,
      errors: [{
        path: "$.events[1].properties.name",
        message: "contains NUL (U+0000), which cannot be stored",
      }],
    },
    {
      index: 2,
      errors: [{
        path: String.raw`$.events[2].properties["a\u0000"]`,
        message: "key contains NUL (U+0000), which cannot be stored",
      }],
    },
    {
      index: 3,
      errors: [
        "$.events[3].profileId",
        "$.events[3].flattenedProperties.x[0]",
        "$.events[3].target.properties.k",
      ].map((path) => ({ path, message: "contains NUL (U+0000), which cannot be stored" })),
    },
  ]);
});

Deno.test("validateBatch: an unpaired surrogate in a string or a key is rejected at its JSON path", () => {
  const lone =
    "contains an unpaired UTF-16 surrogate (not a Unicode character), which cannot be stored";
  const { accepted, rejected } = validateText(eventsText(
    String.raw`{"eventType":"page_viewed","profileId":"p1","properties":{"s":"x\ud800"}}`,
    String.raw`{"eventType":"page_viewed","profileId":"p1","properties":{"s":"\uDC00x"}}`,
    String.raw`{"eventType":"page_viewed","profileId":"p1","properties":{"\uDBFF":1}}`,
    String.raw`{"eventType":"page_viewed","profileId":"p1","sessionId":"\udfff\ud800"}`,
    // A pair, escaped or as itself, is one character: fine.
    String
      .raw`{"eventType":"page_viewed","profileId":"p1","properties":{"s":"\ud83d\ude00😀","\uD83D\uDE00":1}}`,
  ));
  assert.deepEqual(accepted.map((a) => a.index), [4]);
  assert.deepEqual(rejected.map((r) => r.errors), [
    [{ path: "$.events[0].properties.s", message: lone }],
    [{ path: "$.events[1].properties.s", message: lone }],
    [{ path: String.raw`$.events[2].properties["\udbff"]`, message: `key ${lone}` }],
    [{ path: "$.events[3].sessionId", message: lone }],
  ]);
  // Text decoded from bytes is always well-formed; a caller's own text may hold one as itself.
  const raw = validate({ events: [ev({ properties: { s: "a\ud800" } })] });
  assert.deepEqual(raw.rejected[0]!.errors, [{ path: "$.events[0].properties.s", message: lone }]);
});

Deno.test("validateBatch: a timeStamp outside years 0001 to 9999 in UTC is rejected; the bounds are fine", () => {
  for (
    const timeStamp of [
      "0000-01-01T00:00:00Z",
      "0000-12-31T23:59:59.999Z",
      // An offset can carry a four-digit year past either end.
      "0001-01-01T00:30:00+01:00",
      "9999-12-31T23:30:00-01:00",
    ]
  ) {
    assert.deepEqual(errorsOf(ev({ timeStamp })), [{
      path: "$.events[0].timeStamp",
      message: "must lie, in UTC, between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z",
    }], timeStamp);
  }
  for (
    const timeStamp of [
      "0001-01-01T00:00:00Z",
      "0001-01-01T00:30:00-01:00",
      "9999-12-31T23:59:59.999Z",
      "9999-12-31T23:30:00+01:00",
      "1970-01-01T00:00:00Z",
    ]
  ) {
    assertAccepted(ev({ timeStamp }), timeStamp);
  }
});

Deno.test("validateBatch: a number storage would not keep as written is rejected at its path", () => {
  const { accepted, rejected } = validateText(eventsText(
    `{"eventType":"page_viewed","profileId":"p1","properties":{"id":12345678901234567890}}`,
    `{"eventType":"page_viewed","profileId":"p1","properties":{"a":[1, -9007199254740993]}}`,
    `{"eventType":"page_viewed","profileId":"p1","properties":{"big":1e400,"tiny":1e-400}}`,
    `{"eventType":"page_viewed","profileId":"p1","properties":{"pi":3.14159265358979323846}}`,
    `{"eventType":"page_viewed","profileId":"p1","properties":{"split":1234567.8901234567891}}`,
    // Exact whatever their size or spelling: kept.
    `{"eventType":"page_viewed","profileId":"p1","properties":{"max":9007199254740991,` +
      `"min":-9007199254740991,"e":1e20,"f":1.5E+300,"g":0.1,"h":1.50,"i":-0,"j":100000000000000000000,` +
      `"k":0.000000000000000001,"l":123456789.1234567}}`,
  ));
  assert.deepEqual(accepted.map((a) => a.index), [5]);
  assert.deepEqual(rejected.map((r) => r.errors), [
    [{
      path: "$.events[0].properties.id",
      message: "the number 12345678901234567890 cannot be stored exactly " +
        "(it would be stored as 12345678901234567000); send it as a string",
    }],
    [{
      path: "$.events[1].properties.a[1]",
      message: "the number -9007199254740993 cannot be stored exactly " +
        "(it would be stored as -9007199254740992); send it as a string",
    }],
    [
      {
        path: "$.events[2].properties.big",
        message: "the number 1e400 is out of range; send it as a string",
      },
      {
        path: "$.events[2].properties.tiny",
        message: "the number 1e-400 cannot be stored exactly (it would be stored as 0); " +
          "send it as a string",
      },
    ],
    [{
      path: "$.events[3].properties.pi",
      message: "the number 3.14159265358979323846 cannot be stored exactly " +
        "(it would be stored as 3.141592653589793); send it as a string",
    }],
    [{
      path: "$.events[4].properties.split",
      message: "the number 1234567.8901234567891 cannot be stored exactly " +
        "(it would be stored as 1234567.8901234567); send it as a string",
    }],
  ]);
});

Deno.test("validateBatch: storage problems and schema problems of an event are reported together", () => {
  const { accepted, rejected } = validateText(eventsText(
    String.raw`{"eventType":"1x","profileId":"p1","properties":{"s":"\u0000"}}`,
  ));
  assert.equal(accepted.length, 0);
  assert.deepEqual(rejected[0]!.errors.map((e) => e.path), [
    "$.events[0].properties.s",
    "$.events[0].eventType",
  ]);
});

Deno.test("validateBatch: an event reports at most 20 storage problems", () => {
  const strings = Array.from({ length: 30 }, (_, i) => `"k${i}":"\\u0000"`).join(",");
  const { rejected } = validateText(
    eventsText(`{"eventType":"page_viewed","profileId":"p1","properties":{${strings}}}`),
  );
  assert.equal(rejected[0]!.errors.length, 20);
  assert.equal(rejected[0]!.errors[19]!.path, "$.events[0].properties.k19");
});

Deno.test("validateBatch: escapes that only look suspect (an escaped backslash) are accepted", () => {
  const { accepted, rejected } = validateText(eventsText(
    String
      .raw`{"eventType":"page_viewed","profileId":"p1","properties":{"s":"\\u0000 \\ud800","t":"1e5"}}`,
  ));
  assert.deepEqual(rejected, []);
  assert.deepEqual(accepted[0]!.event.properties, { s: String.raw`\u0000 \ud800`, t: "1e5" });
});

Deno.test("parseQueuedEvents: reads an operator's events with their ids; refuses what the edge refuses", () => {
  const events = [
    { id: "e1", eventType: "page_viewed", profileId: "p1", timeStamp: "2026-01-02T03:04:05Z" },
    { id: "e2", eventType: "view", profileId: "p2", properties: { a: 1 } },
  ];
  assert.deepEqual(parseQueuedEvents(JSON.stringify(events)), events);
  // As `deadletter show` prints a letter: its events array is read, the other fields ignored.
  assert.deepEqual(parseQueuedEvents(JSON.stringify({ id: "L", reason: "r", events })), events);

  const refused = (text: string) => {
    try {
      parseQueuedEvents(text);
    } catch (err) {
      return (err as Error).message;
    }
    assert.fail(`accepted ${text}`);
  };
  assert.equal(
    refused(String.raw`{"events":[{"id":"e1","eventType":"page_viewed","profileId":"p\u0000"}]}`),
    "$.events[0].profileId: contains NUL (U+0000), which cannot be stored",
  );
  assert.match(
    refused(`[{"eventType":"page_viewed","profileId":"p1","timeStamp":"0000-01-01T00:00:00Z"}]`),
    /^\$\[0\]\.timeStamp: must lie, in UTC, between .*; \$\[0\]\.id: /,
  );
  assert.match(refused(`[{"id":"e1","eventType":"a","profileId":"p","n":1}]`), /\$\[0\]: /);
  assert.match(
    refused(`[{"id":"e1","eventType":"a","profileId":"p","properties":{"n":1e999}}]`),
    /^\$\[0\]\.properties\.n: the number 1e999 is out of range/,
  );
  assert.match(
    refused(`{"events":[{"id":"e1","eventType":"a","profileId":"p","properties":{"scope":"x"}}]}`),
    /^\$\.events\[0\]\.properties\.scope: scope is bound/,
  );
  assert.match(refused("{"), /not valid JSON/);
  assert.match(refused(`{"id":"L"}`), /a JSON array of events/);
});

/** An event whose JSON is exactly `bytes` UTF-8 bytes (padding with ASCII). */
function eventOfBytes(bytes: number): Record<string, unknown> {
  const base = new TextEncoder().encode(JSON.stringify(ev({ properties: { pad: "" } }))).length;
  const event = ev({ properties: { pad: "x".repeat(bytes - base) } });
  assert.equal(new TextEncoder().encode(JSON.stringify(event)).length, bytes);
  return event;
}

Deno.test("validateBatch: an event over MAX_EVENT_BYTES is rejected at $.events[i]; exactly at it is fine", () => {
  assert.equal(MAX_EVENT_BYTES, 32 * 1024);
  const ids = counter();
  const { accepted, rejected } = validate({
    events: [eventOfBytes(MAX_EVENT_BYTES), eventOfBytes(MAX_EVENT_BYTES + 1), ev()],
  }, { newId: ids.newId });
  assert.deepEqual(accepted.map((a) => [a.index, a.event.id]), [[0, "id-1"], [2, "id-2"]]);
  assert.deepEqual(rejected, [{
    index: 1,
    errors: [{ path: "$.events[1]", message: `event exceeds ${MAX_EVENT_BYTES} bytes` }],
  }]);
  assert.equal(ids.taken, 2);
});

Deno.test("validateBatch: the event size is measured in UTF-8 bytes, not characters", () => {
  // 'é' is one UTF-16 unit but two UTF-8 bytes; '😀' is two units and four bytes.
  for (const char of ["é", "漢", "😀"]) {
    const unitsPerChar = char.length;
    const bytesPerChar = new TextEncoder().encode(char).length;
    const count = Math.ceil(MAX_EVENT_BYTES / bytesPerChar);
    const event = ev({ properties: { pad: char.repeat(count) } });
    const json = JSON.stringify(event);
    assert.ok(json.length < MAX_EVENT_BYTES, "under the limit in UTF-16 units");
    assert.ok(count * unitsPerChar < MAX_EVENT_BYTES);
    assertRejectedAt(event, "$.events[0]", char);
  }
});

// --- the check callback ---

Deno.test("validateBatch: a 'no registered schema' check failure is reported at eventType", () => {
  const { accepted, rejected } = validate({ events: [ev({ eventType: "unknown_type" })] }, {
    check: (e) => ({ error: `no registered schema for event type ${e.eventType}` }),
  });
  assert.deepEqual(accepted, []);
  assert.deepEqual(rejected, [{
    index: 0,
    errors: [{
      path: "$.events[0].eventType",
      message: "no registered schema for event type unknown_type",
    }],
  }]);
});

Deno.test("validateBatch: any other check failure is reported at properties", () => {
  const { rejected } = validate({ events: [ev(), ev()] }, {
    check: () => ({ error: "properties.url: expected string" }),
  });
  assert.deepEqual(
    rejected,
    [0, 1].map((index) => ({
      index,
      errors: [{
        path: `$.events[${index}].properties`,
        message: "properties.url: expected string",
      }],
    })),
  );
});

Deno.test("validateBatch: the check sees the parsed event with its new id; null accepts it", () => {
  const seen: IngestEvent[] = [];
  const raw = ev({
    sessionId: "s1",
    properties: { url: "https://example.com" },
    timeStamp: "2026-01-02T03:04:05Z",
    target: { itemId: "i1", itemType: "product" },
  });
  const { accepted, rejected } = validate({ events: [raw] }, {
    newId: () => "the-id",
    check: (e) => {
      seen.push(structuredClone(e));
      return null;
    },
  });
  assert.deepEqual(rejected, []);
  assert.deepEqual(seen, [{ id: "the-id", ...raw }]);
  // The size the queue chunks by bounds the stored event's, id included (derived from the size
  // without it, so never below the bound measured on the whole event, and close to it). A body
  // this small is sized in one scan, an id allowance (~250) and the wrapper included.
  assert.equal(accepted.length, 1);
  const [{ index, event, storedBytes }] = accepted as [typeof accepted[0]];
  assert.deepEqual({ index, event }, { index: 0, event: { id: "the-id", ...raw } });
  const measured = storedSizeBound({ id: "the-id", ...raw });
  assert.ok(
    storedBytes >= measured && storedBytes <= measured + 300,
    `${storedBytes} vs ${measured}`,
  );
  // Event by event (a body over the per-event limit), the bound is the event's own.
  const padded = JSON.stringify({ events: [raw] }) + " ".repeat(MAX_EVENT_BYTES);
  const [one] = validateBatch(body({ events: [raw] }, padded), {
    maxEvents: 50,
    newId: () => "the-id",
  }).accepted;
  assert.ok(
    one!.storedBytes >= measured && one!.storedBytes <= measured + 64,
    `${one!.storedBytes} vs ${measured}`,
  );
});

// --- accepted events and ids ---

Deno.test("validateBatch: accepted events keep their index and take ids in order", () => {
  const ids = counter();
  const events = [
    ev({ profileId: "a" }),
    ev({ profileId: "bad:id" }),
    ev({ profileId: "b" }),
    ev({ profileId: "c" }),
  ];
  const { accepted, rejected } = validate({ events }, { newId: ids.newId });
  assert.deepEqual(accepted.map(({ index, event }) => ({ index, event })), [
    { index: 0, event: { id: "id-1", ...events[0] } },
    { index: 2, event: { id: "id-2", ...events[2] } },
    { index: 3, event: { id: "id-3", ...events[3] } },
  ]);
  assert.deepEqual(rejected.map((r) => r.index), [1]);
});

Deno.test("validateBatch: ids go to schema-valid, size-valid events, including ones the check rejects", () => {
  const ids = counter();
  const events = [
    ev({ profileId: "ok1" }), // id-1, accepted
    ev({ eventType: "1bad" }), // schema-invalid: no id
    eventOfBytes(MAX_EVENT_BYTES + 1), // too large: no id
    ev({ profileId: "checked" }), // id-2, rejected by the check
    ev({ profileId: "ok2" }), // id-3, accepted
  ];
  const { accepted, rejected } = validate({ events }, {
    newId: ids.newId,
    check: (e) => e.profileId === "checked" ? { error: "properties: nope" } : null,
  });
  assert.equal(ids.taken, 3);
  assert.deepEqual(accepted.map((a) => [a.index, a.event.id]), [[0, "id-1"], [4, "id-3"]]);
  assert.deepEqual(rejected.map((r) => r.index), [1, 2, 3]);
  assert.deepEqual(rejected[2]!.errors, [{
    path: "$.events[3].properties",
    message: "properties: nope",
  }]);
});

Deno.test("validateBatch: the body is not modified", () => {
  const body = { events: [ev({ properties: { a: { b: 1 } } }), ev({ profileId: "x:y" })] };
  const before = structuredClone(body);
  validate(body, { check: () => null });
  assert.deepEqual(body, before);
});

Deno.test("validateBatch: an event too big to store (numbers take 9 bytes) is rejected, not a 503", () => {
  const raw = {
    eventType: "page_viewed",
    profileId: "p1",
    properties: { v: Array(8000).fill(0.5) },
  };
  assert.ok(JSON.stringify(raw).length <= MAX_EVENT_BYTES);
  const { accepted, rejected } = validateBatch(body({ events: [raw] }), {
    maxEvents: 50,
    newId: () => "id",
  });
  assert.equal(accepted.length, 0);
  assert.deepEqual(rejected[0]!.errors.map((e) => e.path), ["$.events[0]"]);
});

Deno.test("scopeBindingPaths: deep nesting is a 400, never a stack overflow", () => {
  const deep = JSON.parse(
    `{"events":[{"properties":{"d":${"[".repeat(5000)}${"]".repeat(5000)}}}]}`,
  );
  assert.throws(() => scopeBindingPaths(deep), (err: unknown) => {
    assert.ok(err instanceof DomainError);
    assert.equal(toHttpError(err).status, 400);
    assert.equal(toHttpError(err).code, "bad_request");
    assert.match(err.message, /nesting deeper than/);
    return true;
  });
  let nested: unknown = { scope: "x" };
  for (let i = 0; i < 20; i++) nested = { a: nested };
  assert.equal(scopeBindingPaths(nested).length, 1);
});

Deno.test("validateBatch: a batch of unusual events gets zod's answer for each", () => {
  const events = [
    JSON.parse('{"eventType":"a","profileId":"p","properties":{"__proto__":{"x":1},"a":1}}'),
    Object.assign(Object.create(null), { eventType: "a", profileId: "p" }),
    { eventType: "a", profileId: "p", sessionId: undefined },
    { eventType: "a", profileId: "p", properties: { constructor: "c" } },
  ];
  const { accepted, rejected } = validate({ events }, { newId: () => "id" });
  assert.deepEqual(rejected, []);
  assert.deepEqual(
    accepted.map((a) => a.event),
    events.map((e) => ({ id: "id", ...keepProtoKeys(e, IngestEventSchema.parse(e)) })),
  );
  // zod drops an own __proto__ key; it is stored as sent, as an own key, not a prototype.
  const properties = accepted[0]!.event.properties!;
  assert.deepEqual(Object.keys(properties), ["a", "__proto__"]);
  assert.equal(Object.getPrototypeOf(properties), Object.prototype);
  assert.equal(JSON.stringify(properties), '{"a":1,"__proto__":{"x":1}}');
});

Deno.test("validateBatch: __proto__, constructor and prototype keys are kept as sent, at every level", () => {
  for (const key of ["__proto__", "constructor", "prototype", "toString", "hasOwnProperty"]) {
    const k = JSON.stringify(key);
    const text =
      `{"events":[{"eventType":"page_viewed","profileId":"p","properties":{${k}:{"a":1},` +
      `"url":"u","n":{${k}:2}},"flattenedProperties":{${k}:3},` +
      `"target":{"itemId":"i","itemType":"page","properties":{${k}:[4],"m":{${k}:{}}}}}]}`;
    const { accepted, rejected } = validateText(text);
    assert.deepEqual(rejected, [], key);
    const { id: _id, ...event } = accepted[0]!.event;
    // JSON.parse makes every key an own key: what was sent, compared key by key.
    assert.deepStrictEqual(event, JSON.parse(text).events[0], key);
    assert.deepStrictEqual(JSON.parse(JSON.stringify(event)), JSON.parse(text).events[0], key);
    assert.equal(Object.getPrototypeOf(event.properties), Object.prototype, key);
  }
  // On the event itself, such a key is an unknown field, refused with its path.
  const { rejected } = validateText(
    `{"events":[{"eventType":"page_viewed","profileId":"p","__proto__":{"x":1}}]}`,
  );
  assert.equal(rejected[0]!.errors[0]!.message.includes("__proto__"), true);
});

/** What validateBatch does with `body`: its error's code and message, or "ok". */
function outcome(body: unknown): string {
  try {
    validate(body);
    return "ok";
  } catch (err) {
    assert.ok(err instanceof DomainError);
    return `${toHttpError(err).code}: ${err.message}`;
  }
}

Deno.test("validateBatch: around the nesting limit, the same answer as the full walk", () => {
  const nest = (levels: number, leaf: unknown, arrays: boolean): unknown => {
    let node = leaf;
    for (let i = 0; i < levels; i++) node = arrays && i % 2 ? [node] : { k: node };
    return node;
  };
  for (let levels = 27; levels <= 33; levels++) {
    for (const arrays of [false, true]) {
      for (const leaf of [1, {}, [], { scope: "x" }, { a: { source: 1 } }, [{ shopDomain: 1 }]]) {
        const body = { events: [ev({ properties: { p: nest(levels, leaf, arrays) } })] };
        let expected = "ok";
        try {
          const paths = scopeBindingPaths(body);
          if (paths.length > 0) {
            expected = `scope_binding: scope is bound to the API key; remove ${paths.join(", ")}`;
          }
        } catch (err) {
          expected = `bad_request: ${(err as Error).message}`;
        }
        assert.equal(
          outcome(body),
          expected,
          `${levels} ${arrays} ${JSON.stringify(leaf)}`,
        );
      }
    }
  }
});

Deno.test("validateBatch: objects JSON.parse never makes are walked in full", () => {
  const hidden = Object.assign(Object.create(null), { scope: "x" });
  assert.match(
    outcome({ events: [ev({ properties: { a: hidden } })] }),
    /^scope_binding: .*\$\.events\[0\]\.properties\.a\.scope$/,
  );
  // A key inherited from a prototype is not the object's own: neither walk reports it.
  const inherited = Object.create({ scope: "x" });
  assert.equal(outcome({ events: [ev({ properties: { a: inherited } })] }), "ok");
});

Deno.test("validateBatch: one scan of a small body sizes its events; they fit one queue message", () => {
  const events = Array.from(
    { length: 50 },
    (_, i) =>
      ev({ properties: { url: `https://x.example/p/${i}`, price: 12.5, tags: ["a", "ü"] } }),
  );
  const { accepted } = validate({ events });
  assert.equal(accepted.length, 50);
  const shares = new Set(accepted.map((a) => a.storedBytes));
  assert.equal(shares.size, 1, "each event carries the same share of the body's bound");
  // The shares bound what KV stores: one message holds them all, ids and envelope included.
  const total = accepted.reduce((sum, a) => sum + a.storedBytes, 0);
  assert.ok(total <= MAX_STORED_EVENT_BYTES + accepted.length);
  const stored = serialize({ events: accepted.map((a) => a.event) }).byteLength;
  assert.ok(stored <= total, `${stored} stored > ${total} bound`);
});

Deno.test("validateBatch: numbers with exponents are sized event by event (their JSON may grow)", () => {
  // 1,600 numbers written `1e20` take 5 characters each in the body and 22 in the event's JSON:
  // a body of ~8 KB whose event is over the 32 KB limit.
  const text = `{"events":[{"eventType":"page_viewed","profileId":"p1","properties":{"v":[${
    Array(1600).fill("1e20").join(",")
  }]}}]}`;
  assert.ok(text.length < MAX_EVENT_BYTES / 3);
  const { accepted, rejected } = validateBatch(body(JSON.parse(text), text), {
    maxEvents: 50,
    newId: () => "id",
  });
  assert.equal(accepted.length, 0);
  assert.deepEqual(rejected[0]!.errors.map((e) => e.path), ["$.events[0]"]);
});

Deno.test("validateBatch: escapes and bytes that are not UTF-8 are sized event by event", () => {
  const options = { maxEvents: 50, newId: () => "id" };
  // An ASCII body whose one `\u0100` makes KV store the whole string at two bytes a unit: its
  // event is past the queue's per-event bound although the body looks narrow.
  const wide = `{"events":[{"eventType":"page_viewed","profileId":"p1","properties":{"s":"${
    "a".repeat(32_600)
  }\\u0100"}}]}`;
  assert.ok(new TextEncoder().encode(wide).byteLength <= MAX_EVENT_BYTES);
  const escaped = validateBatch(parseJsonBody(new TextEncoder().encode(wide)), options);
  assert.equal(escaped.accepted.length, 0);
  assert.deepEqual(escaped.rejected[0]!.errors.map((e) => e.path), ["$.events[0]"]);
  // 11,000 bytes that are not UTF-8: parseJsonBody refuses them; decoded leniently by a caller,
  // they are U+FFFD, three bytes each in the event's JSON.
  const head = new TextEncoder().encode(
    `{"events":[{"eventType":"page_viewed","profileId":"p1","properties":{"s":"`,
  );
  const tail = new TextEncoder().encode(`"}}]}`);
  const bytes = new Uint8Array([...head, ...new Uint8Array(11_000).fill(0xff), ...tail]);
  assert.throws(
    () => parseJsonBody(bytes),
    (err) => toHttpError(err).code === "bad_request" && /UTF-8/.test((err as Error).message),
  );
  const lenient = new TextDecoder().decode(bytes);
  const invalid = validateBatch(
    { value: JSON.parse(lenient), text: lenient, bytes: bytes.byteLength },
    options,
  );
  assert.equal(invalid.accepted.length, 0);
  assert.match(invalid.rejected[0]!.errors[0]!.message, /exceeds 32768 bytes/);
});

Deno.test("parseJsonBody: bytes that are not UTF-8 are 400 bad_request, never replaced", () => {
  const valid = new TextEncoder().encode(`{"events":[{"eventType":"a","profileId":"é"}]}`);
  assert.equal(
    (parseJsonBody(valid).value as { events: { profileId: string }[] }).events[0]!
      .profileId,
    "é",
  );
  for (
    const bad of [
      [0xff],
      [0xc3], // a truncated two-byte sequence
      [0xc0, 0xaf], // an overlong '/'
      [0xed, 0xa0, 0x80], // a surrogate's CESU-8 bytes
      [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
    ]
  ) {
    const bytes = new Uint8Array([
      ...new TextEncoder().encode(
        `{"events":[{"eventType":"a","profileId":"p","properties":{"s":"`,
      ),
      ...bad,
      ...new TextEncoder().encode(`"}}]}`),
    ]);
    assert.throws(
      () => parseJsonBody(bytes),
      (err) =>
        toHttpError(err).status === 400 && toHttpError(err).code === "bad_request" &&
        (err as Error).message === "body is not valid UTF-8",
      JSON.stringify(bad),
    );
  }
});

Deno.test("validateBuiltEvents: sizes what it accepts; refuses oversized, unstorable and unchecked events by index", () => {
  const ok = { id: "m1", eventType: "page_viewed", profileId: "u1", properties: { url: "/" } };
  const big = { ...ok, id: "m2", properties: { x: "y".repeat(40_000) } };
  const nul = { ...ok, id: "m3", properties: { x: "a\u0000b" } };
  const unknown = { ...ok, id: "m4", eventType: "nope" };
  const { accepted, rejected } = validateBuiltEvents(
    [ok, big, nul, unknown].map((event, index) => ({ index, event })),
    (event) => event.eventType === "nope" ? { error: "no registered schema" } : null,
  );
  assert.deepEqual(accepted.map((a) => a.index), [0]);
  assert.ok(accepted[0]!.storedBytes > 0);
  assert.deepEqual(rejected.map((r) => r.index), [1, 2, 3]);
  assert.match(rejected[0]!.errors[0]!.message, /exceeds/);
  assert.equal(rejected[2]!.errors[0]!.message, "no registered schema");
});

Deno.test("validateBuiltEvents: a NUL or an unpaired surrogate in a value or a key is refused at its path; a written \\u is not", () => {
  const ok = { id: "m1", eventType: "page_viewed", profileId: "u1", properties: { url: "/" } };
  const events = [
    { ...ok, id: "k1", properties: { "a\u0000": "b" } },
    { ...ok, id: "k2", properties: { list: ["x", "\ud800"] } },
    { ...ok, id: "k3", properties: { ["\udc00"]: 1 } },
    { ...ok, id: "k4", properties: { path: "C:\\users\\u0000", pair: "\ud83d\ude00" } },
  ];
  const { accepted, rejected } = validateBuiltEvents(
    events.map((event, index) => ({ index, event })),
    () => null,
    "batch",
  );
  assert.deepEqual(accepted.map((a) => a.index), [3]);
  assert.deepEqual(
    rejected.map((r) => [r.index, r.errors.map((e) => e.path)]),
    [
      [0, ['$.batch[0].properties["a\\u0000"]']],
      [1, ["$.batch[1].properties.list[1]"]],
      [2, ['$.batch[2].properties["\\udc00"]']],
    ],
  );
});
