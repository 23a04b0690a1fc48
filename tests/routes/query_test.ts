import assert from "node:assert/strict";
import { DATABASE_URL, errorBody, type TestContext, withContext } from "../test_support.ts";

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;

const query = (ctx: TestContext, key: string, path: string, body: unknown = {}) =>
  ctx.request(`/cdp/query/${path}`, key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

/** A: five profiles (age 10..50; p50 has no age) with events; B: one profile. */
async function seed(ctx: TestContext): Promise<{ a: Brand; b: Brand }> {
  const a = await ctx.seedBrand();
  const b = await ctx.seedBrand();
  const apply = (scope: string, events: Record<string, unknown>[]) =>
    ctx.deps.engine.applyEvents({
      scope,
      source: "server",
      receivedAt: ctx.clock.now().toISOString(),
      events: events.map((e) => ({ id: ctx.deps.newId(), ...e }) as never),
    });
  await apply(
    a.scope!,
    [10, 20, 30, 40, 50].map((age) => ({
      eventType: "updateProperties",
      profileId: `p${age}`,
      timeStamp: `2026-0${age / 10}-15T12:00:00Z`,
      properties: {
        update: age === 50 ? { "properties.tier": "gold" } : { "properties.age": age },
      },
    })),
  );
  await apply(a.scope!, [
    {
      eventType: "order_created",
      profileId: "p10",
      timeStamp: "2026-03-01T00:00:00Z",
      properties: { orderId: "1", total: 30 },
    },
    {
      eventType: "order_created",
      profileId: "p20",
      timeStamp: "2026-03-20T00:00:00Z",
      properties: { orderId: "2", total: 70.5 },
    },
    { eventType: "page_viewed", profileId: "p20", timeStamp: "2026-04-02T00:00:00Z" },
  ]);
  await apply(b.scope!, [
    {
      eventType: "updateProperties",
      profileId: "p10",
      properties: { update: { "properties.age": 99 } },
    },
    { eventType: "order_created", profileId: "p10", properties: { orderId: "9", total: 1000 } },
  ]);
  return { a, b };
}

const ageOver = (n: number) => ({
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.age",
    comparisonOperator: "greaterThan",
    propertyValueInteger: n,
  },
});

Deno.test("query count: profiles and events of the brand only, with and without a condition", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seed(ctx);
    assert.deepEqual(await (await query(ctx, a.key, "profile/count")).json(), {
      itemType: "profile",
      count: 5,
      scope: a.scope,
    });
    assert.equal((await (await query(ctx, b.key, "profile/count")).json()).count, 1);
    assert.equal(
      (await (await query(ctx, a.key, "profile/count", { condition: ageOver(25) })).json()).count,
      2,
    );
    const orders = {
      type: "eventTypeCondition",
      parameterValues: { eventTypeId: "order_created" },
    };
    assert.equal(
      (await (await query(ctx, a.key, "event/count", { condition: orders })).json()).count,
      2,
    );
    assert.equal((await (await query(ctx, a.key, "event/count")).json()).count, 8);
  });
});

Deno.test("query: unknown itemType is 404; scope references and bad conditions are 400", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const unknown = await query(ctx, a.key, "session/count");
    assert.equal(unknown.status, 404);
    assert.equal((await errorBody(unknown)).error, "not_found");
    const scoped = await query(ctx, a.key, "profile/count", {
      condition: {
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.shopDomain",
          comparisonOperator: "equals",
          propertyValue: "x.myshopify.com",
        },
      },
    });
    assert.equal(scoped.status, 400);
    assert.equal((await errorBody(scoped)).error, "invalid_condition");
    const bad = await query(ctx, a.key, "profile/count", {
      condition: { type: "nope", parameterValues: {} },
    });
    assert.equal((await errorBody(bad)).error, "invalid_condition");
    const malformed = await ctx.request("/cdp/query/profile/count", a.key, {
      method: "POST",
      body: "{",
      headers: { "Content-Type": "application/json" },
    });
    assert.equal((await errorBody(malformed)).error, "bad_request");
    const extra = await query(ctx, a.key, "profile/count", { condition: ageOver(1), scope: "x" });
    assert.equal(extra.status, 400);
  });
});

Deno.test("query: a NUL or an unpaired surrogate in a condition or the URL is 400, never 502", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    for (const bad of ["a\u0000b", "\ud800", "x\udc00"]) {
      const cases: [string, unknown, string][] = [
        ["profile/count", {
          type: "profilePropertyCondition",
          parameterValues: {
            propertyName: "properties.email",
            comparisonOperator: "equals",
            propertyValue: bad,
          },
        }, "$.condition.parameterValues.propertyValue"],
        ["event/count", {
          type: "eventTypeCondition",
          parameterValues: { eventTypeId: bad },
        }, "$.condition.parameterValues.eventTypeId"],
        ["event/count", {
          type: "eventPropertyCondition",
          parameterValues: {
            propertyName: `properties.${bad}`,
            comparisonOperator: "exists",
          },
        }, "$.condition.parameterValues.propertyName"],
      ];
      for (const [path, condition, where] of cases) {
        const res = await query(ctx, a.key, path, { condition });
        assert.equal(res.status, 400, `${path} ${JSON.stringify(condition)}`);
        const error = await errorBody(res);
        assert.equal(error.error, "invalid_condition");
        assert.ok(error.error_description.includes(where), error.error_description);
      }
    }
    const urls: [string, unknown][] = [
      ["profile/properties.a%00/metrics", { metrics: ["sum"] }],
      ["event/count?x=%00", {}],
    ];
    for (const [path, body] of urls) {
      const res = await query(ctx, a.key, path, body);
      assert.equal(res.status, 400, path);
      assert.equal((await errorBody(res)).error, "bad_request");
    }
  });
});

Deno.test("query metrics: sum, avg, min, max over numbers only; the allowlist holds", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const res = await query(ctx, a.key, "profile/properties.age/metrics", {
      metrics: ["sum", "avg", "min", "max"],
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      itemType: "profile",
      property: "properties.age",
      metrics: { _sum: 100, _avg: 25, _min: 10, _max: 40 },
      scope: a.scope,
    });
    const filtered = await (await query(ctx, a.key, "profile/properties.age/metrics", {
      metrics: ["sum"],
      condition: ageOver(25),
    })).json();
    assert.deepEqual(filtered.metrics, { _sum: 70 });
    const totals =
      await (await query(ctx, a.key, "event/properties.total/metrics", { metrics: ["sum", "max"] }))
        .json();
    assert.deepEqual(totals.metrics, { _sum: 100.5, _max: 70.5 });
    const times = await (await query(ctx, a.key, "event/timeStamp/metrics", { metrics: ["min"] }))
      .json();
    assert.equal(times.metrics._min, Date.parse("2026-01-15T12:00:00Z"));
    const none = await (await query(ctx, a.key, "profile/properties.missing/metrics", {
      metrics: ["sum", "avg"],
    })).json();
    assert.deepEqual(none.metrics, { _sum: 0, _avg: null });
    for (
      const [path, body] of [
        ["profile/properties.age/metrics", { metrics: [] }],
        ["profile/properties.age/metrics", { metrics: ["median"] }],
        ["profile/properties.age/metrics", {}],
        ["profile/systemProperties.x/metrics", { metrics: ["sum"] }],
        ["profile/properties.shopDomain/metrics", { metrics: ["sum"] }],
        ["profile/scope/metrics", { metrics: ["sum"] }],
        ["profile/flattenedProperties.x/metrics", { metrics: ["sum"] }],
        ["event/eventType/metrics", { metrics: ["sum"] }],
      ] as const
    ) {
      const refused = await query(ctx, a.key, path, body);
      assert.equal(refused.status, 400, `${path} ${JSON.stringify(body)}`);
      assert.equal((await errorBody(refused)).error, "bad_request");
    }
  });
});

Deno.test("query aggregate: numericRange, dateRange (with date math) and date histograms", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    const numeric = await (await query(ctx, a.key, "profile/properties.age/aggregate", {
      aggregate: {
        type: "numericRange",
        ranges: [{ key: "young", to: 25 }, { key: "old", from: 25 }, { from: 0, to: 100 }],
      },
    })).json();
    assert.deepEqual(numeric.results, {
      young: 2,
      old: 2,
      "0-100": 4,
      _all: 5,
      _filtered: 5,
      _missing: 1,
    });
    const filtered = await (await query(ctx, a.key, "profile/properties.age/aggregate", {
      aggregate: { type: "numericRange", ranges: [{ key: "any", from: 0 }] },
      condition: ageOver(15),
    })).json();
    assert.deepEqual(filtered.results, { any: 3, _all: 5, _filtered: 3, _missing: 0 });
    const ranges = await (await query(ctx, a.key, "event/timeStamp/aggregate", {
      aggregate: {
        type: "dateRange",
        ranges: [
          { key: "q1", from: "2026-01-01T00:00:00Z", to: "2026-04-01T00:00:00Z" },
          { key: "recent", from: "now-30d/d" },
        ],
      },
    })).json();
    assert.equal(ranges.results.q1, 5);
    assert.equal(ranges.results.recent, 0);
    assert.equal(ranges.results._all, 8);
    const monthly = await (await query(ctx, a.key, "event/timeStamp/aggregate", {
      aggregate: { type: "date", interval: "1M", format: "yyyy-MM" },
    })).json();
    assert.deepEqual(monthly.results, {
      "2026-01": 1,
      "2026-02": 1,
      "2026-03": 3,
      "2026-04": 2,
      "2026-05": 1,
      _all: 8,
      _filtered: 8,
      _missing: 0,
    });
    for (
      const aggregate of [
        { type: "date" },
        { type: "date", interval: "fortnight" },
        { type: "numericRange" },
        { type: "histogram", interval: "1d" },
        { type: "numericRange", ranges: Array.from({ length: 21 }, (_, i) => ({ from: i })) },
        { type: "numericRange", ranges: [{ from: "ten" }] },
        { type: "dateRange", ranges: [{ from: "not a date" }] },
      ]
    ) {
      const res = await query(ctx, a.key, "event/timeStamp/aggregate", { aggregate });
      assert.equal(res.status, 400, JSON.stringify(aggregate));
    }
  });
});

Deno.test("query aggregate: open ends as null or absent bounds (Unomi's manual), errors name the path", async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    // manual/src/main/asciidoc/queries-and-aggregations.adoc:288-319 (unomi-root-2.7.0): numeric
    // ranges with "from": null and "to": null for the open ends; numbers as strings too.
    const numeric = await query(ctx, a.key, "profile/properties.age/aggregate", {
      aggregate: {
        type: "numericRange",
        ranges: [
          { key: "Less than 25", from: null, to: 25 },
          { key: "25 to 40", from: "25", to: 40 },
          { key: "40 and more", from: 40, to: null },
          { key: "any", to: 1000 },
        ],
      },
    });
    assert.equal(numeric.status, 200);
    assert.deepEqual((await numeric.json()).results, {
      "Less than 25": 2,
      "25 to 40": 1,
      "40 and more": 1,
      any: 4,
      _all: 5,
      _filtered: 5,
      _missing: 1,
    });
    // Lines 211-241: date ranges with null ends; epoch milliseconds as a bound too.
    const dates = await query(ctx, a.key, "event/timeStamp/aggregate", {
      aggregate: {
        type: "dateRange",
        ranges: [
          { key: "before March", from: null, to: "2026-03-01T00:00:00Z" },
          { key: "from March", from: Date.parse("2026-03-01T00:00:00Z"), to: null },
          { key: "epoch text", from: String(Date.parse("2026-05-01T00:00:00Z")) },
        ],
      },
    });
    assert.equal(dates.status, 200);
    const results = (await dates.json()).results;
    assert.deepEqual(
      [results["before March"], results["from March"], results["epoch text"]],
      [2, 6, 1],
    );
    const refusals: [unknown, RegExp][] = [
      [
        { type: "numericRange", ranges: [{ from: true }] },
        /aggregate\.ranges\.0\.from: must be a number, a date string .* or null \(or absent\) for an open end/,
      ],
      [
        { type: "numericRange", ranges: [{ to: "ten" }] },
        /\$\.aggregate\.ranges\[0\]\.to: a numericRange bound must be a number/,
      ],
      [
        { type: "dateRange", ranges: [{ from: null }, { from: "last week" }] },
        /\$\.aggregate\.ranges\[1\]\.from: a dateRange bound must be an ISO 8601 date/,
      ],
    ];
    for (const [aggregate, message] of refusals) {
      const res = await query(ctx, a.key, "event/timeStamp/aggregate", { aggregate });
      assert.equal(res.status, 400, JSON.stringify(aggregate));
      const body = await errorBody(res);
      assert.match(body.error_description, message);
      assert.doesNotMatch(body.error_description, /Invalid input/);
    }
  });
});

Deno.test("query: past its time budget a query answers 503, never hangs", {
  // PGlite runs one session, so a lock held by another connection cannot be waited on there.
  ignore: !DATABASE_URL,
}, async () => {
  await withContext(async (ctx) => {
    const { a } = await seed(ctx);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const locking = ctx.sql.begin(async (tx) => {
      await tx`lock table profiles in access exclusive mode`;
      await held;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const res = await query(ctx, a.key, "profile/count");
    release();
    await locking;
    assert.equal(res.status, 503);
    assert.equal((await errorBody(res)).error, "upstream_unavailable");
  }, { QUERY_TIMEOUT_MS: "200" });
});
