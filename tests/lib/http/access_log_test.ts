import assert from "node:assert/strict";
import { Hono } from "hono";
import { requestId } from "hono/request-id";
import { accessLog, routePattern } from "../../../lib/http/access_log.ts";
import type { LogLevel } from "../../../lib/log.ts";
import { withContext } from "../../test_support.ts";

type Line = { level: LogLevel; message: string; fields: Record<string, unknown> };

function recorder(): { lines: Line[]; log: (l: LogLevel, m: string, f?: object) => void } {
  const lines: Line[] = [];
  return {
    lines,
    log: (level, message, fields = {}) => lines.push({ level, message, fields: { ...fields } }),
  };
}

Deno.test("access log: one line per request with the route pattern, status, duration and ids", async () => {
  const { lines, log } = recorder();
  let tick = 0;
  const app = new Hono<{ Variables: { auth: { brandId: string } } }>();
  app.use(accessLog({ log, clock: () => (tick += 12.5) }));
  app.use(requestId({ generator: () => "req_1" }));
  app.use("/brands/*", async (c, next) => {
    c.set("auth", { brandId: "brand_1" });
    await next();
  });
  app.get("/brands/:id/things/:thing", (c) => c.json({ ok: true }));
  app.get("/boom", () => {
    throw new Error("boom");
  });
  app.onError((_err, c) => c.json({ error: "internal" }, 500));

  await app.request("/brands/b1/things/t9?secret=1", { headers: { Authorization: "Bearer k" } });
  await app.request("/boom");
  await app.request("/nowhere");
  assert.deepEqual(lines, [
    {
      level: "info",
      message: "request",
      fields: {
        method: "GET",
        route: "/brands/:id/things/:thing",
        status: 200,
        duration_ms: 12.5,
        request_id: "req_1",
        brand_id: "brand_1",
      },
    },
    {
      level: "warn",
      message: "request",
      fields: {
        method: "GET",
        route: "/boom",
        status: 500,
        duration_ms: 12.5,
        request_id: "req_1",
        brand_id: null,
      },
    },
    {
      level: "info",
      message: "request",
      fields: {
        method: "GET",
        route: null,
        status: 404,
        duration_ms: 12.5,
        request_id: "req_1",
        brand_id: null,
      },
    },
  ]);
});

Deno.test("access log: the app logs every request, rejected ones too, never the key or the body", async () => {
  const { lines, log } = recorder();
  await withContext(
    async (ctx) => {
      const { key, brandId } = await ctx.seedBrand();
      const body = JSON.stringify({
        events: [{ eventType: "page_viewed", profileId: "p_secret_body", properties: {} }],
      });
      await ctx.request("/cdp/events", key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body,
      });
      await ctx.request("/cdp/profiles/p1", "svc_wrong");
      await ctx.request("/cdp/profiles/p1", key);
      const seen = lines.map((
        l,
      ) => [l.fields.method, l.fields.route, l.fields.status, l.fields.brand_id]);
      assert.deepEqual(seen, [
        ["POST", "/cdp/events", 202, brandId],
        ["GET", "/cdp/profiles/:id", 401, null],
        ["GET", "/cdp/profiles/:id", 404, brandId],
      ]);
      const text = JSON.stringify(lines);
      assert.ok(!text.includes(key) && !text.includes("p_secret_body") && !text.includes("p1"));
    },
    {},
    { log },
  );
});

Deno.test("routePattern: the matched handler's pattern, not a middleware's", async () => {
  const app = new Hono();
  let seen: string | null | undefined;
  app.use("*", async (c, next) => {
    await next();
    seen = routePattern(c);
  });
  app.post("/a/:id", (c) => c.text("ok"));
  await app.request("/a/1", { method: "POST" });
  assert.equal(seen, "/a/:id");
});
