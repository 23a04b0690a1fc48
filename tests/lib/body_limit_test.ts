import assert from "node:assert/strict";
import { Hono } from "hono";
import { bodyLimit } from "../../lib/body_limit.ts";
import { onError } from "../../lib/errors.ts";
import { errorBody } from "../test_support.ts";

const MAX = 1000;

function echoApp(): Hono {
  const app = new Hono();
  app.onError(onError);
  app.use(bodyLimit({ maxBytes: MAX }));
  app.post("/echo", async (c) => {
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    return c.body(bytes, 200, { "x-length": String(bytes.byteLength) });
  });
  app.get("/echo", (c) => c.text("no body"));
  return app;
}

function bytesOf(length: number): Uint8Array<ArrayBuffer> {
  return Uint8Array.from({ length }, (_, i) => (i * 31 + 7) % 256);
}

/** A stream without a Content-Length, in chunks; records whether the consumer cancelled it. */
function chunked(chunks: Uint8Array[], state = { cancelled: false, pulled: 0 }) {
  let i = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      state.pulled++;
      if (i < chunks.length) controller.enqueue(chunks[i++]!);
      else controller.close();
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state };
}

async function assertTooLarge(res: Response): Promise<void> {
  assert.equal(res.status, 413);
  const body = await errorBody(res);
  assert.equal(body.error, "payload_too_large");
  assert.match(body.error_description, /1000 bytes/);
}

Deno.test("bodyLimit: a body under or at the limit reaches the handler intact", async () => {
  const app = echoApp();
  for (const length of [1, 500, MAX]) {
    const sent = bytesOf(length);
    const res = await app.request("/echo", { method: "POST", body: sent });
    assert.equal(res.status, 200, `length ${length}`);
    assert.equal(res.headers.get("x-length"), String(length));
    assert.deepEqual(new Uint8Array(await res.arrayBuffer()), sent);
  }
  const text = await app.request("/echo", { method: "POST", body: "héllo wörld" });
  assert.equal(await text.text(), "héllo wörld");
});

Deno.test("bodyLimit: a chunked body under the limit is reassembled intact", async () => {
  const app = echoApp();
  const sent = bytesOf(900);
  const { stream } = chunked([sent.slice(0, 300), sent.slice(300, 301), sent.slice(301)]);
  const res = await app.request("/echo", { method: "POST", body: stream });
  assert.equal(res.status, 200);
  assert.deepEqual(new Uint8Array(await res.arrayBuffer()), sent);
});

Deno.test("bodyLimit: a declared Content-Length over the limit → 413 payload_too_large", async () => {
  const app = echoApp();
  await assertTooLarge(await app.request("/echo", { method: "POST", body: bytesOf(MAX + 1) }));
  await assertTooLarge(await app.request("/echo", { method: "POST", body: bytesOf(50_000) }));
});

Deno.test("bodyLimit: a streamed body without Content-Length over the limit → 413", async () => {
  const app = echoApp();
  const { stream } = chunked([bytesOf(600), bytesOf(401)]);
  const req = new Request("http://localhost/echo", { method: "POST", body: stream });
  assert.equal(req.headers.get("content-length"), null);
  await assertTooLarge(await app.request(req));
});

Deno.test("bodyLimit: an endless stream is cut off at the limit and cancelled", async () => {
  const app = echoApp();
  const state = { cancelled: false, pulled: 0 };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      state.pulled++;
      controller.enqueue(bytesOf(100));
    },
    cancel() {
      state.cancelled = true;
    },
  });
  await assertTooLarge(await app.request("/echo", { method: "POST", body: stream }));
  assert.ok(state.cancelled, "the request stream was cancelled");
  assert.ok(state.pulled <= 20, `read ${state.pulled} chunks of 100 bytes for a 1000-byte limit`);
});

Deno.test("bodyLimit: a Content-Length that lies (10, body 5,000 bytes) → 413", async () => {
  const app = echoApp();
  const { stream } = chunked([bytesOf(2500), bytesOf(2500)]);
  const req = new Request("http://localhost/echo", {
    method: "POST",
    body: stream,
    headers: { "Content-Length": "10" },
  });
  assert.equal(req.headers.get("content-length"), "10");
  await assertTooLarge(await app.request(req));
});

Deno.test("bodyLimit: GET without a body passes", async () => {
  const app = echoApp();
  const res = await app.request("/echo");
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "no body");
  const empty = await app.request("/echo", { method: "POST" });
  assert.equal(empty.status, 200);
  assert.equal(empty.headers.get("x-length"), "0");
  await empty.body?.cancel();
});
