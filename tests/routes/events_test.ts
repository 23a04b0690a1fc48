import assert from "node:assert/strict";
import { revokeApiKey } from "../../lib/tenancy/api_keys.ts";
import { setBrand } from "../../lib/tenancy/brands.ts";
import type { Rejection } from "../../lib/ingest/edge.ts";
import { startForwarder } from "../../lib/ingest/forwarder.ts";
import { createEmbeddedEngine } from "../../lib/engine/embedded.ts";
import { checkEvent, type Engine } from "../../lib/engine/engine.ts";
import type { Sql } from "../../lib/store/db.ts";
import {
  errorBody,
  eventually,
  recordQueue,
  SPEC_EVENT_TYPES,
  type TestContext,
  withContext,
} from "../test_support.ts";

Deno.test("catalog: 200 with every spec type, sorted by name, and the caller's scope", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 200);
    assert.ok(res.headers.get("x-request-id"));
    const body = await res.json();
    assert.deepEqual(Object.keys(body).sort(), ["eventTypes", "scope"]);
    assert.equal(body.scope, brand.scope);
    const names: string[] = body.eventTypes.map((t: { name: string }) => t.name);
    for (const name of SPEC_EVENT_TYPES) assert.ok(names.includes(name), `missing ${name}`);
    assert.deepEqual(names, [...names].sort());
    for (const entry of body.eventTypes) {
      assert.equal(entry.source, "built-in");
      assert.ok(entry.title && entry.description);
      assert.ok(entry.schema.$id.includes(entry.schema.version), entry.schema.$id);
      assert.ok(entry.schema.required.includes("eventType"));
      assert.ok(entry.schema.required.includes("profileId"));
      for (const description of Object.values(entry.schema.properties)) {
        assert.equal(typeof description, "string");
      }
    }
  });
});

Deno.test("catalog: each brand sees its own scope", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    assert.equal((await (await ctx.request("/cdp/events/types", a.key)).json()).scope, a.scope);
    assert.equal((await (await ctx.request("/cdp/events/types", b.key)).json()).scope, b.scope);
  });
});

Deno.test("auth: missing, malformed, unknown and wrong-checksum keys are 401 unauthorized", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const tampered = brand.key.slice(0, -1) + (brand.key.endsWith("a") ? "b" : "a");
    const cases: [string, Record<string, string>][] = [
      ["no header", {}],
      ["basic scheme", { Authorization: `Basic ${btoa("a:b")}` }],
      ["empty bearer", { Authorization: "Bearer " }],
      ["not svc_", { Authorization: "Bearer sk_live_123" }],
      ["bad checksum", { Authorization: `Bearer ${tampered}` }],
      ["unknown", { Authorization: "Bearer svc_000000000000000000000000000000000000" }],
    ];
    for (const [label, headers] of cases) {
      const res = await ctx.app.request("/cdp/events/types", { headers });
      assert.equal(res.status, 401, label);
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer/, label);
      assert.equal((await errorBody(res)).error, "unauthorized", label);
    }
    // The scheme is case-insensitive (RFC 7235).
    const lower = await ctx.app.request("/cdp/events/types", {
      headers: { Authorization: `bearer ${brand.key}` },
    });
    assert.equal(lower.status, 200);
  });
});

Deno.test("auth: revocation applies to the very next request", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    assert.equal((await ctx.request("/cdp/events/types", brand.key)).status, 200);
    await revokeApiKey(ctx.deps, { brandId: brand.brandId, keyId: brand.keyId });
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 401);
    assert.equal((await errorBody(res)).error, "unauthorized");
  });
});

Deno.test("auth: a brand without a storefront integration is 403 forbidden", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand({ shop: null });
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 403);
    assert.equal((await errorBody(res)).error, "forbidden");
  });
});

Deno.test("auth: a disconnected integration keeps the scope for non-commerce routes", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    await setBrand(ctx.deps, { brandId: brand.brandId, integration: "disconnected" });
    const res = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).scope, brand.scope);
  });
});

Deno.test("routing: other methods are 405 with Allow, before authentication", async () => {
  await withContext(async (ctx) => {
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      const res = await ctx.app.request("/cdp/events/types", { method });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get("allow"), "GET, HEAD, OPTIONS");
      assert.equal((await errorBody(res)).error, "method_not_allowed");
    }
  });
});

Deno.test("routing: OPTIONS is a CORS preflight answer; HEAD follows GET", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const preflight = await ctx.app.request("/cdp/events/types", {
      method: "OPTIONS",
      headers: { Origin: "https://example.com", "Access-Control-Request-Method": "GET" },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
    assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /Authorization/);
    const head = await ctx.request("/cdp/events/types", brand.key, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");
  });
});

Deno.test("routing: unknown routes are a JSON 404 with a request id", async () => {
  await withContext(async (ctx) => {
    for (const path of ["/nope", "/cdp/nope", "/cdp/events/types/extra"]) {
      const res = await ctx.app.request(path);
      assert.equal(res.status, 404, path);
      assert.match(res.headers.get("content-type") ?? "", /application\/json/);
      assert.ok(res.headers.get("x-request-id"));
      assert.equal((await errorBody(res)).error, "not_found");
    }
  });
});

Deno.test("request ids: every answer carries a fresh server id, never the caller's X-Request-Id", async () => {
  await withContext(async (ctx) => {
    const sent = await ctx.app.request("/healthz", { headers: { "X-Request-Id": "abc-123" } });
    await sent.body?.cancel();
    assert.ok(sent.headers.get("x-request-id"));
    assert.notEqual(sent.headers.get("x-request-id"), "abc-123");
    const a = await ctx.app.request("/healthz");
    const b = await ctx.app.request("/healthz");
    await a.body?.cancel();
    await b.body?.cancel();
    assert.notEqual(a.headers.get("x-request-id"), b.headers.get("x-request-id"));
  });
});

Deno.test("rate limit: the API-wide per-key limit answers 429 with Retry-After", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const other = await ctx.seedBrand();
    for (let i = 0; i < 3; i++) {
      const res = await ctx.request("/cdp/events/types", brand.key);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("ratelimit-remaining"), String(2 - i));
      await res.body?.cancel();
    }
    const limited = await ctx.request("/cdp/events/types", brand.key);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    assert.equal((await errorBody(limited)).error, "rate_limited");
    // Another key has its own budget; the next window resets this one.
    assert.equal((await ctx.request("/cdp/events/types", other.key)).status, 200);
    ctx.clock.advance(60_000);
    assert.equal((await ctx.request("/cdp/events/types", brand.key)).status, 200);
  }, { RATE_LIMIT_PER_MINUTE: "3" });
});

Deno.test("usage: each authenticated request is metered once, whatever its status", async () => {
  await withContext(async (ctx) => {
    const { summarizeUsage } = await import("../../lib/http/usage.ts");
    const brand = await ctx.seedBrand();
    const noScope = await ctx.seedBrand({ shop: null });
    await (await ctx.request("/cdp/events/types", brand.key)).body?.cancel();
    await (await ctx.request("/cdp/events/types", brand.key)).body?.cancel();
    await (await ctx.request("/cdp/events/types", noScope.key)).body?.cancel();
    await (await ctx.request("/cdp/events/types", null)).body?.cancel();
    const day = ctx.clock.now().toISOString().slice(0, 10);
    assert.deepEqual(await summarizeUsage(ctx.kv, brand.brandId), [
      { day, family: "events", requests: 2 },
    ]);
    assert.deepEqual(await summarizeUsage(ctx.kv, noScope.brandId), [
      { day, family: "events", requests: 1 },
    ]);
    const records = await Array.fromAsync(
      ctx.kv.list({ prefix: ["usage", "requests", brand.brandId] }),
    );
    assert.equal(records.length, 2);
    assert.equal((records[0]!.value as { status: number }).status, 200);
  });
});

// ---------------------------------------------------------------------------------------------
// POST /cdp/events
// ---------------------------------------------------------------------------------------------

const post = (ctx: TestContext, key: string, body: unknown, query = "") =>
  ctx.request(`/cdp/events${query}`, key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

const view = (profileId: string, extra: Record<string, unknown> = {}) => ({
  eventType: "page_viewed",
  profileId,
  ...extra,
});

Deno.test("ingest async: 202, events queued with server ids and the brand's scope, then applied", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    const res = await post(ctx, brand.key, {
      events: [view("store_1", { sessionId: "s1" }), view("store_1", { sessionId: "s1" })],
    });
    assert.equal(res.status, 202);
    assert.deepEqual(await res.json(), { accepted: 2, rejected: [], scope: brand.scope });
    await eventually(async () =>
      (await ctx.sql`select count(*)::int as n from events`)[0]!.n === 2
    );
    const rows = await ctx.sql`select id, scope, source from events`;
    for (const row of rows) {
      assert.equal(row.scope, brand.scope);
      assert.equal(row.source, "server");
      assert.match(row.id, /^[0-9A-HJKMNP-TV-Z]{26}$/);
    }
    ctx.kv.close();
    await forwarder;
  });
});

Deno.test("ingest async: metered once (202, and 429 past the API limit) and counted by the limit", async () => {
  await withContext(async (ctx) => {
    const { summarizeUsage } = await import("../../lib/http/usage.ts");
    const brand = await ctx.seedBrand();
    for (const remaining of ["2", "1", "0"]) {
      const res = await post(ctx, brand.key, { events: [view("store_1")] });
      assert.equal(res.status, 202);
      assert.equal(res.headers.get("ratelimit-remaining"), remaining);
      await res.body?.cancel();
    }
    const limited = await post(ctx, brand.key, { events: [view("store_1")] });
    assert.equal(limited.status, 429);
    await limited.body?.cancel();
    // An all-rejected batch queues nothing and is still metered once.
    ctx.clock.advance(60_000);
    const rejected = await post(ctx, brand.key, { events: [{ eventType: "page_viewed" }] });
    assert.equal(rejected.status, 202);
    await rejected.body?.cancel();
    const day = ctx.clock.now().toISOString().slice(0, 10);
    assert.deepEqual(await summarizeUsage(ctx.kv, brand.brandId), [
      { day, family: "events", requests: 5 },
    ]);
    const records = await Array.fromAsync(
      ctx.kv.list<{ status: number; route: string }>({
        prefix: ["usage", "requests", brand.brandId],
      }),
    );
    assert.deepEqual(records.map((r) => r.value.status), [202, 202, 202, 429, 202]);
    // A 429 never reached the handler: its route is the pattern of the limiter that refused it.
    assert.ok(records.every((r) => r.value.status !== 202 || r.value.route === "/cdp/events"));
  }, { RATE_LIMIT_PER_MINUTE: "3" });
});

Deno.test("auth: a brand change by another process (the CLI) applies to the next request", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    assert.equal((await ctx.request("/cdp/commerce/orders", brand.key)).status, 200);
    // The CLI opens its own handles on the same stores; its setBrand bumps the brand's version.
    await setBrand({ sql: ctx.sql, kv: ctx.kv, now: ctx.clock.now }, {
      brandId: brand.brandId,
      beta: false,
    });
    const res = await ctx.request("/cdp/commerce/orders", brand.key);
    assert.equal(res.status, 403);
    assert.equal((await errorBody(res)).error, "beta_not_enabled");
  });
});

Deno.test("ingest async: invalid events are reported with JSON paths; the valid ones are accepted", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    const res = await post(ctx, brand.key, {
      events: [
        view("ok_1"),
        view("bad:id"),
        { ...view("ok_2"), color: "red" },
        view("ok_3", { eventType: "not_registered" }),
        { eventType: "9starts_with_digit", profileId: "x" },
        view("ok_4", { timeStamp: "yesterday" }),
        { eventType: "search_submitted", profileId: "ok_5", properties: {} },
        view("ok_6", { target: { itemId: "p" } }),
        view("ok_7"),
      ],
    });
    assert.equal(res.status, 202);
    const body = await res.json();
    assert.equal(body.accepted, 2);
    const paths = Object.fromEntries(
      body.rejected.map((r: Rejection) => [r.index, r.errors.map((e) => e.path)]),
    );
    assert.deepEqual(paths, {
      1: ["$.events[1].profileId"],
      2: ["$.events[2]"],
      3: ["$.events[3].eventType"],
      4: ["$.events[4].eventType"],
      5: ["$.events[5].timeStamp"],
      6: ["$.events[6].properties"],
      7: ["$.events[7].target.itemType"],
    });
    for (const rejection of body.rejected) {
      for (const error of rejection.errors) assert.ok(error.message.length > 0);
    }
    await eventually(() => queue.seen.length === 1);
    assert.deepEqual(queue.seen[0]!.batch.events.map((e) => e.profileId), ["ok_1", "ok_7"]);
    assert.equal(queue.seen[0]!.batch.scope, brand.scope);
    assert.equal(queue.seen[0]!.brandId, brand.brandId);
    ctx.kv.close();
    await queue.listening;
  });
});

Deno.test("ingest: scope, shopDomain or source anywhere is 400 scope_binding and nothing is queued", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    const cases: [unknown, string][] = [
      [{ scope: brand.scope, events: [view("a")] }, "$.scope"],
      [{ events: [view("a", { shopDomain: brand.scope })] }, "$.events[0].shopDomain"],
      [
        { events: [view("a"), view("b", { properties: { source: { name: "x" } } })] },
        "$.events[1].properties.source",
      ],
      [
        { events: [view("a", { flattenedProperties: { scope: "other.myshopify.com" } })] },
        "$.events[0].flattenedProperties.scope",
      ],
      [{
        events: [
          view("a", {
            target: {
              itemId: "i",
              itemType: "product",
              properties: { deep: [{ shopDomain: "x" }] },
            },
          }),
        ],
      }, "$.events[0].target.properties.deep[0].shopDomain"],
    ];
    for (const [body, path] of cases) {
      const res = await post(ctx, brand.key, body);
      assert.equal(res.status, 400, path);
      const error = await errorBody(res);
      assert.equal(error.error, "scope_binding", path);
      assert.ok(error.error_description.includes(path), `${path} in ${error.error_description}`);
    }
    for (const query of ["", "?sync=true"]) {
      const res = await post(ctx, brand.key, {
        events: [view("a", { properties: { scope: brand.scope } })],
      }, query);
      assert.equal((await errorBody(res)).error, "scope_binding");
    }
    // A valid batch afterwards is the only thing that ever reaches the queue.
    assert.equal((await post(ctx, brand.key, { events: [view("marker")] })).status, 202);
    await eventually(() => queue.seen.length === 1);
    assert.deepEqual(queue.seen.map((m) => m.batch.events[0]!.profileId), ["marker"]);
    assert.equal(await (await ctx.sql`select count(*)::int as n from events`)[0]!.n, 0);
    ctx.kv.close();
    await queue.listening;
  });
});

Deno.test("ingest: malformed bodies, batch caps and the sync parameter", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const cases: [unknown, string, number, string][] = [
      ["{not json", "", 400, "bad_request"],
      [[view("a")], "", 400, "bad_request"],
      [{}, "", 400, "bad_request"],
      [{ events: "nope" }, "", 400, "bad_request"],
      [{ events: [] }, "", 400, "bad_request"],
      [{ events: [view("a")], extra: 1 }, "", 400, "bad_request"],
      [{ events: Array.from({ length: 51 }, (_, i) => view(`p${i}`)) }, "", 400, "batch_too_large"],
      [
        { events: Array.from({ length: 11 }, (_, i) => view(`p${i}`)) },
        "?sync=true",
        400,
        "sync_batch_too_large",
      ],
      [{ events: [view("a")] }, "?sync=yes", 400, "bad_request"],
      [{ events: [view("a")] }, "?sync=", 400, "bad_request"],
    ];
    for (const [body, query, status, code] of cases) {
      const res = await post(ctx, brand.key, body, query);
      assert.equal(res.status, status, `${JSON.stringify(body).slice(0, 40)} ${query}`);
      assert.equal((await errorBody(res)).error, code);
    }
    const fifty = await post(ctx, brand.key, {
      events: Array.from({ length: 50 }, (_, i) => view(`p${i}`)),
    });
    assert.equal(fifty.status, 202);
    assert.equal((await fifty.json()).accepted, 50);
    assert.equal((await post(ctx, brand.key, { events: [view("a")] }, "?sync=false")).status, 202);
  });
});

Deno.test("ingest: a body over 256 KB is 413 before parsing, with or without Content-Length", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const big = JSON.stringify({
      events: [view("a", { properties: { pad: "x".repeat(300_000) } })],
    });
    const declared = await post(ctx, brand.key, big);
    assert.equal(declared.status, 413);
    assert.equal((await errorBody(declared)).error, "payload_too_large");
    const streamed = await ctx.request("/cdp/events", brand.key, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: new Blob([big]).stream(),
    });
    assert.equal(streamed.status, 413);
    await streamed.body?.cancel();
    // Just under the limit is parsed (and this event is too big for one event: rejected).
    const under = await post(ctx, brand.key, {
      events: [view("a", { properties: { pad: "x".repeat(200_000) } })],
    });
    assert.equal(under.status, 202);
    assert.match((await under.json()).rejected[0].errors[0].message, /exceeds 32768 bytes/);
  });
});

Deno.test("ingest sync: 200 with a result per accepted event; applied before the answer", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const res = await post(ctx, brand.key, {
      events: [
        {
          eventType: "updateProperties",
          profileId: "store_9",
          properties: { update: { "properties.email": "n@example.com" } },
        },
        view("bad:id"),
        view("store_9", { eventType: "not_registered" }),
        view("store_9"),
      ],
    }, "?sync=true");
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.scope, brand.scope);
    assert.equal(body.accepted, 3);
    assert.deepEqual(body.rejected.map((r: Rejection) => r.index), [1]);
    assert.deepEqual(body.results[0], {
      index: 0,
      ok: true,
      status: 200,
      result: { updated: 1, processedItems: 1 },
    });
    assert.equal(body.results[1].index, 2);
    assert.equal(body.results[1].ok, false);
    assert.equal(body.results[1].status, 400);
    assert.match(body.results[1].error, /no registered schema/);
    assert.deepEqual(body.results[2], {
      index: 3,
      ok: true,
      status: 200,
      result: { updated: 0, processedItems: 1 },
    });
    const [profile] = await ctx.sql`select properties from profiles where item_id = 'store_9'`;
    assert.equal(profile!.properties.email, "n@example.com");
    assert.equal(profile!.properties.shopDomain, brand.scope);
  });
});

Deno.test("ingest sync: past the budget it is 503 upstream_unavailable; nothing stored or queued", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    await ctx.sql`
      create function slow_insert() returns trigger language plpgsql as $$
      begin perform pg_sleep(0.6); return new; end $$`;
    await ctx
      .sql`create trigger slow before insert on events for each row execute function slow_insert()`;
    const res = await post(ctx, brand.key, { events: [view("slow")] }, "?sync=true");
    assert.equal(res.status, 503);
    assert.equal((await errorBody(res)).error, "upstream_unavailable");
    // Wait for the abandoned transaction to finish, then look.
    await ctx.sql.begin(async (tx) => {
      await tx`lock table events in access exclusive mode`;
    });
    await ctx.sql`drop trigger slow on events`;
    assert.equal((await ctx.sql`select count(*)::int as n from events`)[0]!.n, 0);
    assert.equal((await ctx.sql`select count(*)::int as n from profiles`)[0]!.n, 0);
    assert.equal((await post(ctx, brand.key, { events: [view("marker")] })).status, 202);
    await eventually(() => queue.seen.length === 1);
    assert.equal(queue.seen[0]!.batch.events[0]!.profileId, "marker");
    ctx.kv.close();
    await queue.listening;
  }, { SYNC_BUDGET_MS: "200" });
});

const _delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The engine's connection, with one transaction's timing changed: `afterCommit` holds back the
 * end of a commit, `beforeWork` the start of the work in the transaction, each for `ms`.
 * Either wait starts after the route's budget timer was set, so it ends after that timer fired
 * (timers fire in deadline order): the budget always runs out inside the wait, with no guess at
 * how long anything takes. `settled` resolves once the transaction is over.
 */
function timedSql(sql: Sql, where: "afterCommit" | "beforeWork", ms: number) {
  let settle!: () => void;
  const settled = new Promise<void>((resolve) => settle = resolve);
  const wrapped = new Proxy(sql, {
    get(target, prop, receiver) {
      if (prop !== "begin") return Reflect.get(target, prop, receiver);
      return async (fn: (tx: unknown) => Promise<unknown>) => {
        try {
          const result = await target.begin(async (tx) => {
            if (where === "beforeWork") await _delay(ms);
            return await fn(tx);
          });
          if (where === "afterCommit") await _delay(ms);
          return result;
        } finally {
          settle();
        }
      };
    },
  });
  return { sql: wrapped, settled };
}

/** An engine whose connection is chosen once the test context (and its database) exists. */
function lateEngine(): { engine: Engine; use(sql: Sql, now: () => Date): void } {
  let inner: Engine | undefined;
  return {
    engine: { checkEvent, applyEvents: (batch, options) => inner!.applyEvents(batch, options) },
    use(sql, now) {
      inner = createEmbeddedEngine({ sql, now });
    },
  };
}

for (const where of ["afterCommit", "beforeWork"] as const) {
  Deno.test(
    `ingest sync: the budget running out ${
      where === "afterCommit" ? "while the batch commits" : "before the work starts"
    }: 503 only when nothing was stored, 200 when stored`,
    async () => {
      const late = lateEngine();
      await withContext(
        async (ctx) => {
          const brand = await ctx.seedBrand();
          const timed = timedSql(ctx.sql, where, 200);
          late.use(timed.sql, ctx.clock.now);
          const res = await post(
            ctx,
            brand.key,
            { events: [view("late_1"), view("late_2")] },
            "?sync=true",
          );
          const text = await res.text();
          await timed.settled;
          const [stored] = await ctx.sql`select count(*)::int as n from events`;
          if (res.status === 503) {
            assert.equal(stored!.n, 0, `503 but stored: ${text}`);
            assert.match(text, /nothing was stored/);
          } else {
            assert.equal(res.status, 200, text);
            assert.equal(stored!.n, 2);
          }
          // Each side of the gate, as arranged: the commit had begun, or the budget ran out first.
          assert.equal(res.status, where === "afterCommit" ? 200 : 503, text);
        },
        { SYNC_BUDGET_MS: "100" },
        { engine: late.engine },
      );
    },
  );
}

Deno.test("ingest async: values storage cannot hold are rejected per event with their paths; the rest is queued", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const queue = recordQueue(ctx.kv);
    // As a client sends it: escapes in the body's text.
    const res = await post(
      ctx,
      brand.key,
      String.raw`{"events":[
        {"eventType":"page_viewed","profileId":"ok_1"},
        {"eventType":"page_viewed","profileId":"p","properties":{"name":"a\u0000b"}},
        {"eventType":"page_viewed","profileId":"p","properties":{"k\u0000":1}},
        {"eventType":"page_viewed","profileId":"p","properties":{"s":"\ud800"}},
        {"eventType":"page_viewed","profileId":"p","timeStamp":"0000-01-01T00:00:00Z"},
        {"eventType":"page_viewed","profileId":"p","properties":{"id":9007199254740993}},
        {"eventType":"page_viewed","profileId":"ok_2","properties":{"s":"\ud83d\ude00"}}
      ]}`,
    );
    assert.equal(res.status, 202);
    const body = await res.json();
    assert.equal(body.accepted, 2);
    assert.deepEqual(
      body.rejected.map((r: Rejection) => [r.index, r.errors.map((e) => e.path)]),
      [
        [1, ["$.events[1].properties.name"]],
        [2, [String.raw`$.events[2].properties["k\u0000"]`]],
        [3, ["$.events[3].properties.s"]],
        [4, ["$.events[4].timeStamp"]],
        [5, ["$.events[5].properties.id"]],
      ],
    );
    assert.match(body.rejected[0].errors[0].message, /NUL/);
    assert.match(body.rejected[2].errors[0].message, /unpaired UTF-16 surrogate/);
    assert.match(body.rejected[4].errors[0].message, /cannot be stored exactly/);
    await eventually(() => queue.seen.length === 1);
    assert.deepEqual(queue.seen[0]!.batch.events.map((e) => e.profileId), ["ok_1", "ok_2"]);
    ctx.kv.close();
    await queue.listening;
  });
});

Deno.test("ingest sync: an event the database refuses is a per-event 400 in results; the others apply (200, not 503)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    // A rule of the database's that the edge knows nothing of, raising a data exception.
    await ctx.sql`
      create function refuse_poison() returns trigger language plpgsql as $$
      begin
        if new.profile_id = 'poison' then
          raise exception 'profile id refused by a rule' using errcode = '22023';
        end if;
        return new;
      end $$`;
    await ctx.sql`
      create trigger refuse_poison before insert on events
      for each row execute function refuse_poison()`;
    const res = await post(ctx, brand.key, {
      events: [
        view("ok_1"),
        view("poison"),
        view("ok_2", { properties: { v: "\u0000" } }),
        view("ok_3"),
      ],
    }, "?sync=true");
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.accepted, 3);
    assert.deepEqual(body.rejected, [{
      index: 2,
      errors: [{
        path: "$.events[2].properties.v",
        message: "contains NUL (U+0000), which cannot be stored",
      }],
    }]);
    assert.deepEqual(body.results, [
      { index: 0, ok: true, status: 200, result: { updated: 0, processedItems: 1 } },
      { index: 1, ok: false, status: 400, error: "profile id refused by a rule (SQLSTATE 22023)" },
      { index: 3, ok: true, status: 200, result: { updated: 0, processedItems: 1 } },
    ]);
    const stored = await ctx.sql`select profile_id from events order by profile_id`;
    assert.deepEqual(stored.map((r) => r.profile_id), ["ok_1", "ok_3"]);
  });
});

Deno.test("ingest sync: its own throttle answers 429 sync_throttled with Retry-After", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    for (let i = 0; i < 2; i++) {
      assert.equal((await post(ctx, brand.key, { events: [view("a")] }, "?sync=true")).status, 200);
    }
    const throttled = await post(ctx, brand.key, { events: [view("a")] }, "?sync=true");
    assert.equal(throttled.status, 429);
    assert.ok(Number(throttled.headers.get("retry-after")) >= 1);
    assert.equal((await errorBody(throttled)).error, "sync_throttled");
    // Async ingest is not subject to the sync throttle.
    assert.equal((await post(ctx, brand.key, { events: [view("a")] })).status, 202);
    ctx.clock.advance(60_000);
    assert.equal((await post(ctx, brand.key, { events: [view("a")] }, "?sync=true")).status, 200);
  }, { SYNC_RATE_LIMIT_PER_MINUTE: "2" });
});

Deno.test("ingest: when the queue is unavailable, 503 service_unavailable and nothing accepted", async () => {
  const queueKv = await Deno.openKv(":memory:");
  queueKv.close();
  await withContext(
    async (ctx) => {
      const brand = await ctx.seedBrand();
      const res = await post(ctx, brand.key, { events: [view("a"), view("b")] });
      assert.equal(res.status, 503);
      const error = await errorBody(res);
      assert.equal(error.error, "service_unavailable");
      assert.match(error.error_description, /no events were accepted/);
    },
    {},
    { queueKv },
  );
});

Deno.test("ingest: auth and scope rules, 405 for other methods, brands kept apart", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    const noScope = await ctx.seedBrand({ shop: null });
    assert.equal(
      (await ctx.request("/cdp/events", null, { method: "POST", body: "{}" })).status,
      401,
    );
    const forbidden = await post(ctx, noScope.key, { events: [view("a")] });
    assert.equal(forbidden.status, 403);
    assert.equal((await errorBody(forbidden)).error, "forbidden");
    const get = await ctx.app.request("/cdp/events");
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST, OPTIONS");
    await post(ctx, a.key, { events: [view("shared_id")] }, "?sync=true");
    await post(ctx, b.key, { events: [view("shared_id")] }, "?sync=true");
    const scopes = await ctx
      .sql`select scope from profiles where item_id = 'shared_id' order by scope`;
    assert.deepEqual(scopes.map((r) => r.scope), [a.scope, b.scope].sort());
  });
});

// ---------------------------------------------------------------------------------------------
// Fidelity: every field an event may carry is stored and read back as sent
// ---------------------------------------------------------------------------------------------

/**
 * Apache Unomi's page view (manual, "Sending events": `view` with `target.properties.pageInfo`),
 * with every field the contract accepts on an event, scope and source left out as it requires.
 */
const unomiView = (profileId: string, sessionId: string) => ({
  eventType: "view",
  profileId,
  sessionId,
  timeStamp: "2026-11-20T09:30:15.250+02:00",
  properties: { pageInfo: { pageName: "Home" }, nested: { list: [1, "two", null, true] } },
  flattenedProperties: { "utm.campaign": "spring", count: 3 },
  target: {
    itemId: "homepage",
    itemType: "page",
    properties: {
      pageInfo: {
        pageID: "homepage",
        pagePath: "/home",
        destinationURL: "https://acme.example/home",
        referringURL: "https://apache.org/",
        language: "en",
      },
      attributes: [],
      consentTypes: [{ typeIdentifier: "newsletter", status: "GRANTED" }],
      interests: { shoes: 2.5 },
    },
  },
});

/** What GET /cdp/profiles/{id}/events must answer for an event sent as `sent`. */
function expectedView(sent: ReturnType<typeof unomiView>, scope: string, source: string) {
  return {
    eventType: sent.eventType,
    profileId: sent.profileId,
    sessionId: sent.sessionId,
    // The same instant, in UTC (the contract's timeStamp is an ISO 8601 instant).
    timeStamp: new Date(sent.timeStamp).toISOString(),
    properties: sent.properties,
    flattenedProperties: sent.flattenedProperties,
    target: sent.target,
    source,
    scope,
  };
}

async function readEvents(ctx: TestContext, key: string, profileId: string) {
  const res = await ctx.request(`/cdp/profiles/${profileId}/events`, key);
  assert.equal(res.status, 200);
  const body = await res.json();
  return body.list.map(({ itemId: _id, ...rest }: Record<string, unknown>) => rest);
}

Deno.test("fidelity: async ingest stores every accepted field as sent (target.properties included)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    const sent = unomiView("store_fid_1", "s_fid_1");
    assert.equal((await post(ctx, brand.key, { events: [sent] })).status, 202);
    await eventually(async () =>
      (await ctx.sql`select count(*)::int as n from events`)[0]!.n === 1
    );
    assert.deepEqual(await readEvents(ctx, brand.key, "store_fid_1"), [
      expectedView(sent, brand.scope!, "server"),
    ]);
    ctx.kv.close();
    await forwarder;
  });
});

Deno.test("fidelity: sync ingest stores every accepted field as sent, and conditions reach target.properties", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const sent = unomiView("store_fid_2", "s_fid_2");
    const other = {
      ...unomiView("store_fid_3", "s_fid_3"),
      target: { itemId: "x", itemType: "page" },
    };
    const res = await post(ctx, brand.key, { events: [sent, other] }, "?sync=true");
    assert.equal(res.status, 200);
    assert.deepEqual((await res.json()).results.map((r: { ok: boolean }) => r.ok), [true, true]);
    assert.deepEqual(await readEvents(ctx, brand.key, "store_fid_2"), [
      expectedView(sent, brand.scope!, "server"),
    ]);
    // Unomi's commonest page-view segment: profiles that viewed /home.
    const byPath = {
      type: "pastEventCondition",
      parameterValues: {
        eventCondition: {
          type: "eventPropertyCondition",
          parameterValues: {
            propertyName: "target.properties.pageInfo.pagePath",
            comparisonOperator: "equals",
            propertyValue: "/home",
          },
        },
      },
    };
    const count = async (itemType: string, condition: unknown) => {
      const answer = await ctx.request(`/cdp/query/${itemType}/count`, brand.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ condition }),
      });
      assert.equal(answer.status, 200);
      return (await answer.json()).count;
    };
    assert.equal(await count("profile", byPath), 1);
    assert.equal(
      await count("event", {
        type: "eventPropertyCondition",
        parameterValues: {
          propertyName: "target.properties.interests.shoes",
          comparisonOperator: "greaterThan",
          propertyValueDouble: 2,
        },
      }),
      1,
    );
    // The scope allowlist applies under target.properties as under properties.
    const refused = await ctx.request("/cdp/query/event/count", brand.key, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        condition: {
          type: "eventPropertyCondition",
          parameterValues: {
            propertyName: "target.properties.shopDomain",
            comparisonOperator: "exists",
          },
        },
      }),
    });
    assert.equal(refused.status, 400);
    assert.match((await errorBody(refused)).error_description, /scope or shopDomain/);
  });
});

Deno.test("fidelity: __proto__, constructor and prototype keys are stored as sent and read back (sync and async)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const keys = ["__proto__", "constructor", "prototype", "toString"];
    // Each key at the top of properties, flattenedProperties and target.properties, and nested.
    const eventText = (profileId: string) =>
      `{"eventType":"page_viewed","profileId":"${profileId}","sessionId":"s_${profileId}",` +
      `"timeStamp":"2026-11-21T11:00:00.000Z","properties":{"url":"u",` +
      keys.map((k) => `"${k}":{"${k}":1,"v":"${k}"}`).join(",") +
      `},"flattenedProperties":{` + keys.map((k) => `"${k}":"f"`).join(",") +
      `},"target":{"itemId":"i","itemType":"page","properties":{` +
      keys.map((k) => `"${k}":[1]`).join(",") + `}}}`;
    const expected = (profileId: string) => ({
      ...JSON.parse(eventText(profileId)),
      source: "server",
      scope: brand.scope,
    });
    const readBack = async (profileId: string) => {
      const res = await ctx.request(`/cdp/profiles/${profileId}/events`, brand.key);
      assert.equal(res.status, 200);
      const [{ itemId: _id, ...stored }] = JSON.parse(await res.text()).list;
      return stored;
    };

    const sync = await post(ctx, brand.key, `{"events":[${eventText("p_sync")}]}`, "?sync=true");
    assert.equal(sync.status, 200);
    assert.equal((await sync.json()).accepted, 1);
    assert.deepStrictEqual(await readBack("p_sync"), expected("p_sync"));

    const forwarder = startForwarder({
      queue: ctx.queue,
      engine: ctx.deps.engine,
      now: ctx.clock.now,
    });
    const queued = await post(ctx, brand.key, `{"events":[${eventText("p_async")}]}`);
    assert.equal(queued.status, 202);
    await eventually(async () =>
      (await ctx.sql`select count(*)::int as n from events`)[0]!.n === 2
    );
    assert.deepStrictEqual(await readBack("p_async"), expected("p_async"));
    ctx.kv.close();
    await forwarder;
  });
});

Deno.test("ingest: a body that is not UTF-8 is 400 bad_request (sync and async), nothing stored", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const bytes = new Uint8Array([
      ...new TextEncoder().encode(`{"events":[{"eventType":"page_viewed","profileId":"p","x":"`),
      0xc3,
      0x28,
      ...new TextEncoder().encode(`"}]}`),
    ]);
    for (const query of ["", "?sync=true"]) {
      const res = await ctx.request(`/cdp/events${query}`, brand.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: bytes,
      });
      assert.equal(res.status, 400, query);
      assert.deepEqual(await errorBody(res), {
        error: "bad_request",
        error_description: "body is not valid UTF-8",
      });
    }
    assert.equal((await ctx.sql`select count(*)::int as n from events`)[0]!.n, 0);
  });
});

Deno.test("fidelity: updateProperties values holding __proto__ or constructor keys reach the profile as sent", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const properties = `{"update":{"properties.prefs":{"__proto__":{"x":1},"constructor":2,` +
      `"a":{"__proto__":3}}},"add":{"properties.other":{"prototype":4}},"__proto__":{"y":5}}`;
    const res = await post(
      ctx,
      brand.key,
      `{"events":[{"eventType":"updateProperties","profileId":"p_up","properties":${properties}}]}`,
      "?sync=true",
    );
    assert.equal(res.status, 200);
    assert.equal((await res.json()).results[0].result.updated, 1);
    const profile = JSON.parse(await (await ctx.request("/cdp/profiles/p_up", brand.key)).text())
      .profile;
    assert.deepStrictEqual(
      profile.properties.prefs,
      JSON.parse(properties).update["properties.prefs"],
    );
    assert.deepStrictEqual(profile.properties.other, { prototype: 4 });
    const [stored] = JSON.parse(
      await (await ctx.request("/cdp/profiles/p_up/events", brand.key)).text(),
    ).list;
    assert.deepStrictEqual(stored.properties, JSON.parse(properties));
  });
});

Deno.test("ingest: an event's properties.context gives its session the context's properties (GET sessions)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const context = {
      page: { url: "https://acme.example/?utm_medium=cpc", referrer: "https://duckduckgo.com/" },
      userAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
      locale: "de-DE",
    };
    const res = await post(ctx, brand.key, {
      events: [
        view("ctx_1", { properties: { url: context.page.url, context } }),
        view("ctx_1", { properties: { url: "https://acme.example/next" } }),
      ],
    }, "?sync=true");
    assert.equal(res.status, 200);
    const sessions = await (await ctx.request("/cdp/profiles/ctx_1/sessions", brand.key)).json();
    assert.equal(sessions.list.length, 1);
    assert.equal(sessions.list[0].eventCount, 2);
    assert.deepEqual(sessions.list[0].properties, {
      landingPageURL: context.page.url,
      landingPagePath: "/",
      referringURL: "https://duckduckgo.com/",
      utmMedium: "cpc",
      userAgentName: "Firefox",
      userAgentVersion: "133.0",
      userAgentNameAndVersion: "Firefox@@133.0",
      operatingSystemName: "Windows",
      deviceCategory: "desktop",
      locale: "de-DE",
    });
  });
});
