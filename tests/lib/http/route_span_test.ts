import assert from "node:assert/strict";

const ROUTE_SPAN = new URL("../../../lib/http/route_span.ts", import.meta.url).href;

// A service with the middleware, traced by Deno's built-in OpenTelemetry: one request, then exit
// (which flushes the spans to the exporter).
const CHILD = `
  import { Hono } from "hono";
  import { routeSpan } from ${JSON.stringify(ROUTE_SPAN)};
  const app = new Hono();
  app.use(routeSpan());
  app.get("/cdp/profiles/:id", (c) => c.text("ok"));
  const server = Deno.serve({ port: 0, onListen() {} }, app.fetch);
  await (await fetch("http://127.0.0.1:" + server.addr.port + "/cdp/profiles/p1")).text();
  await server.shutdown();
`;

interface _Span {
  name: string;
  attributes: { key: string; value: { stringValue?: string } }[];
}

Deno.test("route span: with OTEL_DENO=true the request's span is named by its route", async () => {
  const spans: _Span[] = [];
  // An OTLP/HTTP JSON collector on loopback.
  const collector = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, async (req) => {
    const body = await req.json();
    if (new URL(req.url).pathname === "/v1/traces") {
      for (const resource of body.resourceSpans ?? []) {
        for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      }
    }
    return Response.json({});
  });
  try {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["eval", CHILD],
      env: {
        OTEL_DENO: "true",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.addr.port}`,
      },
    }).output();
    assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
    const served = spans.find((span) => span.attributes.some((a) => a.key === "http.route"));
    assert.ok(served, JSON.stringify(spans.map((span) => span.name)));
    assert.equal(served.name, "GET /cdp/profiles/:id");
    const route = served.attributes.find((a) => a.key === "http.route");
    assert.equal(route?.value.stringValue, "/cdp/profiles/:id");
  } finally {
    await collector.shutdown();
  }
});
