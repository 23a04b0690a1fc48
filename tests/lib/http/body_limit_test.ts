import assert from "node:assert/strict";
import { Hono } from "hono";
import { bodyLimit } from "../../../lib/http/body_limit.ts";
import { onError } from "../../../lib/http/errors.ts";
import { errorBody, type TestContext, withContext } from "../../test_support.ts";

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

// ASCII bytes: a body with no Content-Type must be UTF-8.
function bytesOf(length: number): Uint8Array<ArrayBuffer> {
  return Uint8Array.from({ length }, (_, i) => (i * 31 + 7) % 128);
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

Deno.test("bodyLimit: a body that is not UTF-8 is 400 bad_request unless declared binary", async () => {
  const app = echoApp();
  const bad = new Uint8Array([...new TextEncoder().encode('{"a":"'), 0xff, 0xfe, 0x22, 0x7d]);
  for (const type of ["application/json", "application/json; charset=utf-8", "text/plain", null]) {
    const headers: Record<string, string> = type === null ? {} : { "Content-Type": type };
    const res = await app.request("/echo", { method: "POST", headers, body: bad });
    assert.equal(res.status, 400, String(type));
    const body = await errorBody(res);
    assert.equal(body.error, "bad_request");
    assert.equal(body.error_description, "body is not valid UTF-8");
  }
  for (const type of ["application/octet-stream", "multipart/form-data; boundary=x"]) {
    const res = await app.request("/echo", {
      method: "POST",
      headers: { "Content-Type": type },
      body: bad,
    });
    assert.equal(res.status, 200, type);
    assert.deepEqual(new Uint8Array(await res.arrayBuffer()), bad);
  }
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

Deno.test("bodyLimit: a body that stalls past the deadline → 408 request_timeout, read cancelled", async () => {
  const app = new Hono();
  app.onError(onError);
  app.use(bodyLimit({ maxBytes: MAX, timeoutMs: 200 }));
  app.post("/echo", (c) => c.text("read"));
  const state = { cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytesOf(10)); // then nothing more, ever
    },
    cancel() {
      state.cancelled = true;
    },
  });
  const res = await app.request("/echo", { method: "POST", body: stream });
  assert.equal(res.status, 408);
  const body = await errorBody(res);
  assert.equal(body.error, "request_timeout");
  assert.match(body.error_description, /200 ms/);
  assert.ok(state.cancelled, "the stalled read was cancelled");
});

// --- Real connections: the app served by Deno.serve, a raw TCP client -------------------------

const _encoder = new TextEncoder();

/** The app of a test context served on a free port. */
function serve(ctx: TestContext): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, ctx.app.fetch);
}

/** Reads one HTTP/1.1 response (head and Content-Length body) off a raw connection, or null at EOF. */
async function readResponse(
  conn: Deno.Conn,
): Promise<{ status: number; headers: string; body: string } | null> {
  const decoder = new TextDecoder();
  let text = "";
  const buf = new Uint8Array(4096);
  while (true) {
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) {
      const head = text.slice(0, end);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      const body = text.slice(end + 4);
      if (_encoder.encode(body).byteLength >= length) {
        return { status: Number(head.split(" ")[1]), headers: head, body };
      }
    }
    const n = await conn.read(buf).catch(() => null);
    if (n === null) return null;
    text += decoder.decode(buf.subarray(0, n), { stream: true });
  }
}

/** Rejects after `ms`: a test's bound on a wait that, on broken code, never ends. */
function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const _sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const path of ["/cdp/events", "/cdp/segments"]) {
  Deno.test(`slow client: a body trickled 1 byte per 100 ms to ${path} → 408 request_timeout`, async () => {
    await withContext(async (ctx) => {
      const { key } = await ctx.seedBrand();
      const server = serve(ctx);
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
      let answered = false;
      try {
        await conn.write(_encoder.encode(
          `POST ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\n` +
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        ));
        // 1,000 bytes at 10 a second would take 100 s; the deadline is 600 ms.
        const trickle = (async () => {
          for (let i = 0; i < 1000 && !answered; i++) {
            await _sleep(100);
            if (answered) break;
            await conn.write(_encoder.encode(i === 0 ? "{" : " ")).catch(() => (answered = true));
          }
        })();
        const res = await bounded(readResponse(conn), 15_000, "a trickled body");
        answered = true;
        await trickle;
        assert.ok(res, "the server answered before closing");
        assert.equal(res.status, 408);
        assert.equal(JSON.parse(res.body).error, "request_timeout");
        assert.match(res.headers, /\r\nconnection: close/i);
      } finally {
        answered = true;
        try {
          conn.close();
        } catch { /* the server closed it */ }
        await server.shutdown();
      }
    }, { BODY_READ_TIMEOUT_MS: "600" });
  });
}

Deno.test("client disconnect: a body cut off by the client is logged as a disconnect, not a 500", async () => {
  await withContext(async (ctx) => {
    const { key } = await ctx.seedBrand();
    const lines: string[] = [];
    const { log, error } = console;
    console.log = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
    console.error = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
    const server = serve(ctx);
    try {
      for (const path of ["/cdp/events", "/cdp/segments"]) {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
        await conn.write(_encoder.encode(
          `POST ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\n` +
            `Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"events": [`,
        ));
        await _sleep(100);
        conn.close();
        const seen = (async () => {
          while (!lines.some((l) => l.includes("client disconnected") && l.includes(path))) {
            await _sleep(20);
          }
        })();
        await bounded(seen, 10_000, `a disconnect line for ${path}`);
      }
    } finally {
      console.log = log;
      console.error = error;
      await server.shutdown();
    }
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const path of ["/cdp/events", "/cdp/segments"]) {
      const line = records.find((r) => r.message === "client disconnected" && r.path === path);
      assert.ok(line, `a disconnect line for ${path}: ${lines.join("\n")}`);
      assert.equal(line.level, "info");
      assert.equal(line.method, "POST");
      assert.equal(typeof line.request_id, "string");
    }
    assert.deepEqual(
      records.filter((r) => r.level === "error" || r.status === 500),
      [],
      "no error line",
    );
  });
});

Deno.test("every JSON-body route answers a body that is not UTF-8 with 400 bad_request", async () => {
  await withContext(async (ctx) => {
    const { key, scope } = await ctx.seedBrand();
    const bytes = new Uint8Array([
      ..._encoder.encode(`{"name":"`),
      0xe2,
      0x82, // a three-byte sequence cut short
      ..._encoder.encode(`","condition":{"type":"matchAllCondition","parameterValues":{}}}`),
    ]);
    const routes: [string, Record<string, string>][] = [
      ["/cdp/segments", { Authorization: `Bearer ${key}` }],
      ["/cdp/query/profile/count", { Authorization: `Bearer ${key}` }],
      ["/cdp/events", { Authorization: `Bearer ${key}` }],
      ["/cdp/events?sync=true", { Authorization: `Bearer ${key}` }],
      [`/cdp/ingest?shop=${scope}`, { Origin: `https://${scope}` }],
      ["/webhooks/shopify", {
        "X-Shopify-Topic": "orders/create",
        "X-Shopify-Shop-Domain": scope!,
        "X-Shopify-Webhook-Id": "w1",
        "X-Shopify-Hmac-Sha256": "AAAA",
      }],
    ];
    for (const [path, headers] of routes) {
      const res = await ctx.app.request(path, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: bytes,
      });
      assert.equal(res.status, 400, path);
      assert.deepEqual(await errorBody(res), {
        error: "bad_request",
        error_description: "body is not valid UTF-8",
      }, path);
    }
    assert.equal((await ctx.sql`select count(*)::int as n from segments`)[0]!.n, 0);
  });
});
