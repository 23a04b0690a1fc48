import assert from "node:assert/strict";
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { DomainError, type DomainErrorKind } from "../../../lib/errors.ts";
import { HttpError, onError, onNotFound, toHttpError } from "../../../lib/http/errors.ts";

/** Runs `fn` with console.error captured, so 5xx logging can be asserted without noise. */
async function captureErrors(fn: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
  try {
    await fn();
  } finally {
    console.error = original;
  }
  return lines;
}

function throwingApp(error: () => unknown): Hono {
  const app = new Hono();
  app.onError(onError);
  app.notFound(onNotFound);
  app.get("/boom", () => {
    throw error();
  });
  return app;
}

Deno.test("HttpError: carries status, code, message, headers and cause", () => {
  const cause = new Error("root");
  const err = new HttpError(429, "rate_limited", "slow down", {
    headers: { "Retry-After": "3" },
    cause,
  });
  assert.ok(err instanceof Error);
  assert.equal(err.name, "HttpError");
  assert.equal(err.status, 429);
  assert.equal(err.code, "rate_limited");
  assert.equal(err.message, "slow down");
  assert.deepEqual(err.headers, { "Retry-After": "3" });
  assert.equal(err.cause, cause);
  assert.deepEqual(new HttpError(404, "not_found", "x").headers, {});
});

Deno.test("toHttpError: an HttpError passes through unchanged", () => {
  const err = new HttpError(409, "conflict", "taken");
  assert.equal(toHttpError(err), err);
});

Deno.test("toHttpError: hono's HTTPException keeps its status and maps its code", () => {
  const exception = new HTTPException(400, { message: "Malformed JSON in request body" });
  const mapped = toHttpError(exception);
  assert.ok(mapped instanceof HttpError);
  assert.equal(mapped.status, 400);
  assert.equal(mapped.code, "bad_request");
  assert.equal(mapped.message, "Malformed JSON in request body");
  assert.equal(mapped.cause, exception);
  const expected: [number, string][] = [
    [401, "unauthorized"],
    [403, "forbidden"],
    [404, "not_found"],
    [413, "payload_too_large"],
    [415, "unsupported_media_type"],
    [429, "rate_limited"],
  ];
  for (const [status, code] of expected) {
    const err = toHttpError(new HTTPException(status as 400, { message: "m" }));
    assert.equal(err.status, status);
    assert.equal(err.code, code);
  }
});

Deno.test("toHttpError: anything else is an opaque 500 that does not leak the message", () => {
  const original = new Error("password=hunter2 at db.internal");
  const mapped = toHttpError(original);
  assert.equal(mapped.status, 500);
  assert.equal(mapped.code, "internal_error");
  assert.equal(mapped.message, "Internal server error");
  assert.ok(!mapped.message.includes("hunter2"));
  assert.equal(mapped.cause, original);
  for (const thrown of ["a string", 42, null, undefined, { message: "object" }]) {
    const err = toHttpError(thrown);
    assert.equal(err.status, 500);
    assert.equal(err.code, "internal_error");
    assert.equal(err.message, "Internal server error");
  }
});

Deno.test("toHttpError: a database that is down, restarting or out of time is a retryable 503", () => {
  const codes = ["ECONNREFUSED", "ECONNRESET", "CONNECTION_CLOSED", "57P01", "57P03", "08006"];
  for (const code of [...codes, "57014"]) {
    const mapped = toHttpError(Object.assign(new Error(`driver says ${code}`), { code }));
    assert.equal(mapped.status, 503, code);
    assert.equal(mapped.code, "upstream_unavailable", code);
    assert.equal(mapped.headers["Retry-After"], "1", code);
  }
  assert.match(toHttpError({ code: "57014" }).message, /time budget/);
});

// PostgreSQL's messages for values it refuses, as a segment or a query could once reach them.
const _REFUSED: [string, string][] = [
  ["22021", 'invalid byte sequence for encoding "UTF8": 0x00'],
  ["2201B", "invalid regular expression: regular expression is too complex"],
  ["22008", 'date/time field value out of range: "0000-12-31T23:00:00.000Z"'],
  ["22009", 'time zone displacement out of range: "+010000-01-01T00:00:00.000Z"'],
  ["22003", "numeric field overflow"],
  ["22P02", 'invalid input syntax for type integer: "x"'],
  ["22012", "division by zero"],
  ["23514", 'new row for relation "profiles" violates check constraint "profiles_scope_check"'],
  ["54000", 'index row size 9000 exceeds btree version 4 maximum 2704 for index "x"'],
];

Deno.test("toHttpError: a value PostgreSQL refuses is a 400 with a generic message, never the database's", () => {
  for (const [code, message] of _REFUSED) {
    const mapped = toHttpError(Object.assign(new Error(message), { code }));
    assert.equal(mapped.status, 400, code);
    assert.equal(mapped.code, "bad_request", code);
    assert.equal(
      mapped.message,
      "A value cannot be stored or compared; check the request's values",
    );
    assert.ok(!mapped.message.includes(message), code);
  }
  // Other SQLSTATEs stay opaque.
  assert.equal(toHttpError({ code: "42P01" }).status, 500);
});

Deno.test("onError: the database's message for a refused value goes to the log only", async () => {
  for (const [code, message] of _REFUSED) {
    const app = throwingApp(() => Object.assign(new Error(message), { code }));
    let text = "";
    const logged = await captureErrors(async () => {
      const res = await app.request("/boom");
      assert.equal(res.status, 400);
      text = await res.text();
    });
    assert.ok(!text.includes(message), text);
    assert.ok(!/PostgreSQL|SQLSTATE|relation|regular expression|out of range/i.test(text), text);
    assert.equal(logged.length, 1, code);
    const entry = JSON.parse(logged[0]!);
    assert.equal(entry.level, "warn");
    assert.equal(entry.sqlstate, code);
    assert.equal(entry.error, message);
  }
});

Deno.test("onError: writes exactly error and error_description, and copies the headers", async () => {
  const app = throwingApp(() =>
    new HttpError(429, "rate_limited", "Rate limit exceeded", {
      headers: { "Retry-After": "7", "RateLimit-Remaining": "0" },
    })
  );
  const res = await app.request("/boom");
  assert.equal(res.status, 429);
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
  assert.equal(res.headers.get("retry-after"), "7");
  assert.equal(res.headers.get("ratelimit-remaining"), "0");
  assert.deepEqual(await res.json(), {
    error: "rate_limited",
    error_description: "Rate limit exceeded",
  });
});

Deno.test("onError: an HTTPException becomes the envelope with its status", async () => {
  const app = throwingApp(() => new HTTPException(401, { message: "no credential" }));
  const res = await app.request("/boom");
  assert.equal(res.status, 401);
  assert.deepEqual(await res.json(), { error: "unauthorized", error_description: "no credential" });
});

Deno.test("onError: a plain Error is a 500 without message or stack in the body, logged server-side", async () => {
  const app = throwingApp(() => new Error("secret-db-password leaked"));
  let res: Response | undefined;
  let text = "";
  const logged = await captureErrors(async () => {
    res = await app.request("/boom");
    text = await res.text();
  });
  assert.equal(res?.status, 500);
  assert.deepEqual(JSON.parse(text), {
    error: "internal_error",
    error_description: "Internal server error",
  });
  assert.ok(!text.includes("secret-db-password"));
  assert.ok(!/\bat \S+|\.ts:\d+|stack/i.test(text), text);
  // The details go to the log instead, with the method and path.
  assert.equal(logged.length, 1);
  const entry = JSON.parse(logged[0]!);
  assert.equal(entry.level, "error");
  assert.equal(entry.status, 500);
  assert.equal(entry.method, "GET");
  assert.equal(entry.path, "/boom");
  assert.match(entry.error, /secret-db-password leaked/);
  assert.match(entry.error, /errors_test\.ts/);
});

Deno.test("onError: 4xx errors are not logged", async () => {
  const app = throwingApp(() => new HttpError(404, "not_found", "Order not found"));
  const logged = await captureErrors(async () => {
    const res = await app.request("/boom");
    assert.equal(res.status, 404);
    await res.body?.cancel();
  });
  assert.deepEqual(logged, []);
});

Deno.test("onNotFound: unknown routes get the JSON envelope", async () => {
  const res = await throwingApp(() => new Error("unused")).request("/nope", { method: "DELETE" });
  assert.equal(res.status, 404);
  assert.deepEqual(await res.json(), {
    error: "not_found",
    error_description: "No route for DELETE /nope",
  });
});

Deno.test("toHttpError: each domain error kind gets the contract's status and code", () => {
  const cases: [DomainErrorKind, number, string][] = [
    ["invalid_input", 400, "bad_request"],
    ["invalid_condition", 400, "invalid_condition"],
    ["not_found", 404, "not_found"],
    ["conflict", 409, "conflict"],
    ["forbidden", 403, "forbidden"],
    ["throttled", 429, "rate_limited"],
    ["unavailable", 503, "upstream_unavailable"],
    ["upstream_failed", 502, "upstream_error"],
    ["unauthenticated", 401, "unauthorized"],
    ["scope_binding", 400, "scope_binding"],
    ["batch_too_large", 400, "batch_too_large"],
    ["sync_batch_too_large", 400, "sync_batch_too_large"],
    ["queue_full", 503, "queue_full"],
    ["service_unavailable", 503, "service_unavailable"],
    ["internal", 500, "internal_error"],
  ];
  for (const [kind, status, code] of cases) {
    const mapped = toHttpError(new DomainError(kind, `a ${kind} error`));
    assert.equal(mapped.status, status, kind);
    assert.equal(mapped.code, code, kind);
    assert.equal(mapped.message, `a ${kind} error`);
  }
  const throttled = toHttpError(
    new DomainError("throttled", "slow down", { retryAfterSeconds: 3 }),
  );
  assert.equal(throttled.headers["Retry-After"], "3");
  const challenged = toHttpError(
    new DomainError("unauthenticated", "who are you", { challenge: 'Bearer realm="cdp"' }),
  );
  assert.deepEqual(challenged.headers, { "WWW-Authenticate": 'Bearer realm="cdp"' });
  // A 5xx is logged with what failed underneath, as when lib/ threw HttpError with that cause.
  const underneath = new Error("kv: database is locked");
  const wrapped = new DomainError("service_unavailable", "queue down", { cause: underneath });
  assert.equal(toHttpError(wrapped).cause, underneath);
  const alone = new DomainError("internal", "no cause of its own");
  assert.equal(toHttpError(alone).cause, alone);
});
