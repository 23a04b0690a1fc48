import assert from "node:assert/strict";
import { Hono } from "hono";
import type { AppEnv } from "../../../lib/http/app_env.ts";
import type { AuthContext } from "../../../lib/http/auth.ts";
import { usageDailyKey, usageRecordKey } from "../../../lib/store/kv_keys.ts";
import {
  meterInto,
  routeFamily,
  summarizeUsage,
  usageMeter,
  type UsageRecord,
} from "../../../lib/http/usage.ts";
import { testClock, withKv } from "../../test_support.ts";

async function count(kv: Deno.Kv, brand: string, day: string, family: string, n: number) {
  const result = await kv.atomic().sum(usageDailyKey(brand, day, family), BigInt(n)).commit();
  assert.ok(result.ok);
}

Deno.test("routeFamily: the segment after /cdp, or the first segment elsewhere", () => {
  const cases: [string, string][] = [
    ["/cdp/query/profile/count", "query"],
    ["/cdp/events/types", "events"],
    ["/cdp/profiles", "profiles"],
    ["/cdp/profiles/abc/events", "profiles"],
    ["/healthz", "healthz"],
    ["/openapi.json", "openapi.json"],
    ["/", "root"],
  ];
  for (const [path, family] of cases) assert.equal(routeFamily(path), family, path);
});

Deno.test("summarizeUsage: all days in order, as numbers, for one brand only", async () => {
  await withKv(async (kv) => {
    await count(kv, "brand_a", "2026-11-19", "events", 3);
    await count(kv, "brand_a", "2026-11-20", "events", 2);
    await count(kv, "brand_a", "2026-11-20", "query", 5);
    await count(kv, "brand_a", "2026-11-21", "profiles", 1);
    await count(kv, "brand_a", "2026-11-21", "profiles", 1);
    // Neighbouring brand ids must not leak in.
    await count(kv, "brand_a0", "2026-11-20", "events", 100);
    await count(kv, "brand_", "2026-11-20", "events", 100);

    assert.deepEqual(await summarizeUsage(kv, "brand_a"), [
      { day: "2026-11-19", family: "events", requests: 3 },
      { day: "2026-11-20", family: "events", requests: 2 },
      { day: "2026-11-20", family: "query", requests: 5 },
      { day: "2026-11-21", family: "profiles", requests: 2 },
    ]);
    assert.deepEqual(await summarizeUsage(kv, "brand_b"), []);
  });
});

Deno.test("summarizeUsage: from and to are inclusive day bounds", async () => {
  await withKv(async (kv) => {
    for (const day of ["2026-10-31", "2026-11-01", "2026-11-15", "2026-11-30", "2026-12-01"]) {
      await count(kv, "brand_a", day, "events", 1);
      await count(kv, "brand_a", day, "query", 2);
    }
    const days = async (
      range: { from?: string; to?: string },
    ) => [...new Set((await summarizeUsage(kv, "brand_a", range)).map((row) => row.day))];

    assert.deepEqual(await days({ from: "2026-11-01", to: "2026-11-30" }), [
      "2026-11-01",
      "2026-11-15",
      "2026-11-30",
    ]);
    assert.deepEqual(await days({ from: "2026-11-15" }), [
      "2026-11-15",
      "2026-11-30",
      "2026-12-01",
    ]);
    assert.deepEqual(await days({ to: "2026-11-01" }), ["2026-10-31", "2026-11-01"]);
    assert.deepEqual(await days({ from: "2026-11-15", to: "2026-11-15" }), ["2026-11-15"]);
    assert.deepEqual(await days({ from: "2026-11-16", to: "2026-11-29" }), []);
    // Both families of a bounding day are included.
    assert.deepEqual(await summarizeUsage(kv, "brand_a", { from: "2026-12-01" }), [
      { day: "2026-12-01", family: "events", requests: 1 },
      { day: "2026-12-01", family: "query", requests: 2 },
    ]);
  });
});

Deno.test("usageMeter: meters authenticated requests once, whatever the status", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    const auth = { brandId: "brand_a", keyId: "key_1" } as AuthContext;
    const app = new Hono<AppEnv>();
    app.use(async (c, next) => {
      c.set("requestId", c.req.header("x-request-id") ?? "anon");
      c.set("clientRequestId", c.req.header("x-client-id") ?? null);
      if (c.req.header("x-auth")) c.set("auth", auth);
      await next();
    });
    app.use(usageMeter({ kv, now: clock.now }));
    app.get("/cdp/query/profile/count", (c) => c.json({ count: 1 }));
    app.get("/cdp/events/types", (c) => c.json({ error: "x" }, 403));

    const send = async (path: string, id: string, authed = true) => {
      const headers: Record<string, string> = { "x-request-id": id, "x-client-id": `c_${id}` };
      if (authed) headers["x-auth"] = "1";
      await (await app.request(path, { headers })).body?.cancel();
    };
    await send("/cdp/query/profile/count", "r1");
    await send("/cdp/query/profile/count", "r2");
    await send("/cdp/events/types", "r3");
    await send("/cdp/events/types", "r4", false);

    const day = "2026-11-21";
    assert.deepEqual(await summarizeUsage(kv, "brand_a"), [
      { day, family: "events", requests: 1 },
      { day, family: "query", requests: 2 },
    ]);
    const record = (await kv.get<UsageRecord>(usageRecordKey("brand_a", day, "r3"))).value;
    assert.deepEqual(record, {
      request_id: "r3",
      client_request_id: "c_r3",
      key_id: "key_1",
      method: "GET",
      route: "/cdp/events/types",
      family: "events",
      status: 403,
      at: clock.now().toISOString(),
      duration_ms: 0,
    });
    assert.equal((await kv.get(usageRecordKey("brand_a", day, "r4"))).value, null);
    const records = await Array.fromAsync(kv.list({ prefix: ["usage", "requests"] }));
    assert.equal(records.length, 3);
  });
});

Deno.test("meterInto: a handler folds the pending writes and the usage record into its own commit", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    const auth = { brandId: "brand_a", keyId: "key_1" } as AuthContext;
    const app = new Hono<AppEnv>();
    app.use(async (c, next) => {
      c.set("requestId", c.req.header("x-request-id")!);
      c.set("auth", auth);
      await next();
    });
    app.use(usageMeter({ kv, now: clock.now }));
    app.use(async (c, next) => {
      // What a limiter leaves for the meter's commit.
      c.get("meter").writes.push((op) => op.sum(["test_counter"], 1n));
      await next();
    });
    app.post("/cdp/events", async (c) => {
      const op = kv.atomic().set(["handler_write"], c.get("requestId"));
      if (c.req.query("fold") === "yes") {
        assert.equal(meterInto(c, op, 202, clock.now()), true);
        await op.commit();
        c.get("meter").done = true;
      } else {
        await op.commit();
      }
      return c.json({}, 202);
    });
    const send = async (id: string, fold: string) =>
      await (await app.request(`/cdp/events?fold=${fold}`, {
        method: "POST",
        headers: { "x-request-id": id },
      })).body?.cancel();
    await send("r1", "yes");
    await send("r2", "no");
    // Either way: one record per request, one count per request, each pending write once.
    assert.deepEqual(await summarizeUsage(kv, "brand_a"), [
      { day: "2026-11-21", family: "events", requests: 2 },
    ]);
    assert.equal((await kv.get<Deno.KvU64>(["test_counter"])).value?.value, 2n);
    const r1 = (await kv.get<UsageRecord>(usageRecordKey("brand_a", "2026-11-21", "r1"))).value;
    assert.equal(r1?.status, 202);
    assert.equal(r1?.route, "/cdp/events");
  });
});
