import assert from "node:assert/strict";
import { Hono } from "hono";
import type { AppEnv } from "../../../lib/http/app_env.ts";
import { onError } from "../../../lib/http/errors.ts";
import { rateCounterKey, rateLimitKey } from "../../../lib/store/kv_keys.ts";
import {
  admitBySum,
  hitRateLimit,
  hitRateLimits,
  rateLimit,
  type RateLimitPolicy,
} from "../../../lib/http/rate_limit.ts";
import { errorBody, testClock, withKv } from "../../test_support.ts";
import { openKv } from "../../../lib/store/kv_store.ts";

const MINUTE: RateLimitPolicy = { name: "api", limit: 3, windowMs: 60_000 };

Deno.test("hitRateLimit: exactly `limit` hits per window, then refused until the window ends", async () => {
  await withKv(async (kv) => {
    // The test clock starts on a minute boundary; move 15.5 s into the window.
    const clock = testClock();
    clock.advance(15_500);
    for (let i = 0; i < 3; i++) {
      const result = await hitRateLimit(kv, MINUTE, "key_1", clock.now());
      assert.deepEqual(result, {
        allowed: true,
        limit: 3,
        remaining: 2 - i,
        retryAfterSeconds: 45,
      });
    }
    const refused = await hitRateLimit(kv, MINUTE, "key_1", clock.now());
    assert.deepEqual(refused, { allowed: false, limit: 3, remaining: 0, retryAfterSeconds: 45 });
    // Refused hits are not counted.
    const windowStart = Date.parse("2026-11-21T12:00:00.000Z");
    assert.equal((await kv.get(rateLimitKey("api", "key_1", windowStart))).value, 3);

    clock.advance(30_000); // 45.5 s in: 14.5 s left
    assert.equal((await hitRateLimit(kv, MINUTE, "key_1", clock.now())).retryAfterSeconds, 15);
    clock.advance(14_499); // 1 ms left: still at least 1
    const last = await hitRateLimit(kv, MINUTE, "key_1", clock.now());
    assert.equal(last.allowed, false);
    assert.equal(last.retryAfterSeconds, 1);
  });
});

Deno.test("hitRateLimit: the next window resets the count", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    for (let i = 0; i < 3; i++) await hitRateLimit(kv, MINUTE, "key_1", clock.now());
    assert.equal((await hitRateLimit(kv, MINUTE, "key_1", clock.now())).allowed, false);
    clock.advance(60_000);
    const fresh = await hitRateLimit(kv, MINUTE, "key_1", clock.now());
    assert.equal(fresh.allowed, true);
    assert.equal(fresh.remaining, 2);
    assert.equal(fresh.retryAfterSeconds, 60);
  });
});

Deno.test("hitRateLimit: subjects and limiter names are independent", async () => {
  await withKv(async (kv) => {
    const now = testClock().now();
    for (let i = 0; i < 3; i++) await hitRateLimit(kv, MINUTE, "key_1", now);
    assert.equal((await hitRateLimit(kv, MINUTE, "key_1", now)).allowed, false);

    const otherSubject = await hitRateLimit(kv, MINUTE, "key_2", now);
    assert.equal(otherSubject.allowed, true);
    assert.equal(otherSubject.remaining, 2);

    const sync: RateLimitPolicy = { name: "sync", limit: 3, windowMs: 60_000 };
    const otherLimiter = await hitRateLimit(kv, sync, "key_1", now);
    assert.equal(otherLimiter.allowed, true);
    assert.equal(otherLimiter.remaining, 2);
  });
});

Deno.test("hitRateLimit: 50 concurrent hits with limit 20 allow exactly 20", async () => {
  await withKv(async (kv) => {
    const now = testClock().now();
    const policy: RateLimitPolicy = { name: "api", limit: 20, windowMs: 60_000 };
    const results = await Promise.all(
      Array.from({ length: 50 }, () => hitRateLimit(kv, policy, "key_1", now)),
    );
    assert.equal(results.filter((r) => r.allowed).length, 20);
    const remaining = results.filter((r) => r.allowed).map((r) => r.remaining).sort((a, b) =>
      a - b
    );
    assert.deepEqual(remaining, Array.from({ length: 20 }, (_, i) => i));
    const windowStart = Math.floor(now.getTime() / 60_000) * 60_000;
    assert.equal((await kv.get(rateLimitKey("api", "key_1", windowStart))).value, 20);
  });
});

Deno.test("hitRateLimit: contention alone never refuses a hit under the limit", async () => {
  await withKv(async (kv) => {
    const now = testClock().now();
    const policy: RateLimitPolicy = { name: "api", limit: 1000, windowMs: 60_000 };
    const results = await Promise.all(
      Array.from({ length: 50 }, () => hitRateLimit(kv, policy, "key_1", now)),
    );
    assert.equal(results.filter((r) => r.allowed).length, 50);
  });
});

Deno.test("hitRateLimit: two KV handles on one file share the limit (two processes)", async () => {
  const path = await Deno.makeTempFile({ suffix: ".sqlite3" });
  // Opened as the service opens KV (busy retries): two handles on one file can find it locked.
  const a = await openKv(path);
  const b = await openKv(path);
  try {
    const clock = testClock();
    const policy: RateLimitPolicy = { name: "api", limit: 20, windowMs: 60_000 };
    // The two "processes" take turns; each sees the other's hits.
    const results = [];
    for (let i = 0; i < 30; i++) {
      results.push(await hitRateLimit(i % 2 ? a : b, policy, "key_1", clock.now()));
    }
    assert.deepEqual(
      results.map((r) => r.allowed),
      Array.from({ length: 30 }, (_, i) => i < 20),
    );
    assert.deepEqual(
      results.slice(0, 20).map((r) => r.remaining),
      Array.from({ length: 20 }, (_, i) => 19 - i),
    );
    // Both handles agree that the next window starts afresh.
    clock.advance(60_000);
    assert.equal((await hitRateLimit(a, policy, "key_1", clock.now())).remaining, 19);
    assert.equal((await hitRateLimit(b, policy, "key_1", clock.now())).remaining, 18);
  } finally {
    a.close();
    b.close();
    for (const file of [path, `${path}-wal`, `${path}-shm`]) {
      await Deno.remove(file).catch(() => {});
    }
  }
});

Deno.test("rateLimit middleware: RateLimit-* headers, then 429 with Retry-After", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    clock.advance(20_000);
    const app = new Hono<AppEnv>();
    app.onError(onError);
    app.use(rateLimit({
      kv,
      now: clock.now,
      rules: [{
        policy: { name: "mw", limit: 2, windowMs: 60_000 },
        subject: (c) => c.req.header("x-subject") ?? null,
      }],
    }));
    app.get("/", (c) => c.text("ok"));

    for (const remaining of ["1", "0"]) {
      const res = await app.request("/", { headers: { "x-subject": "s1" } });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), "ok");
      assert.equal(res.headers.get("ratelimit-limit"), "2");
      assert.equal(res.headers.get("ratelimit-remaining"), remaining);
      assert.equal(res.headers.get("ratelimit-reset"), "40");
    }
    const limited = await app.request("/", { headers: { "x-subject": "s1" } });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get("retry-after"), "40");
    assert.equal(limited.headers.get("ratelimit-remaining"), "0");
    const body = await errorBody(limited);
    assert.equal(body.error, "rate_limited");
    assert.match(body.error_description, /40s/);

    // A null subject is not throttled and gets no headers.
    for (let i = 0; i < 3; i++) {
      const res = await app.request("/");
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("ratelimit-limit"), null);
      await res.body?.cancel();
    }
  });
});

// --- sum-counted windows ---

const SUMMED: RateLimitPolicy = { name: "api", limit: 3, windowMs: 60_000, counting: "sum" };

async function hitBySum(kv: Deno.Kv, policy: RateLimitPolicy, subject: string, now: Date) {
  const { count, ...result } = await admitBySum(kv, policy, subject, now);
  if (result.allowed) {
    const op = kv.atomic();
    count(op);
    assert.ok((await op.commit()).ok);
  }
  return result;
}

Deno.test("admitBySum: admits up to the limit from the window's count, refused hits are not counted", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    clock.advance(15_500);
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(await hitBySum(kv, SUMMED, "key_1", clock.now()), {
        allowed: true,
        limit: 3,
        remaining: 2 - i,
        retryAfterSeconds: 45,
      });
    }
    assert.deepEqual(await hitBySum(kv, SUMMED, "key_1", clock.now()), {
      allowed: false,
      limit: 3,
      remaining: 0,
      retryAfterSeconds: 45,
    });
    const windowStart = Date.parse("2026-11-21T12:00:00.000Z");
    const counter = await kv.get<Deno.KvU64>(rateCounterKey("api", "key_1", windowStart));
    assert.equal(counter.value?.value, 3n);
    assert.equal((await hitBySum(kv, SUMMED, "key_2", clock.now())).allowed, true);
    clock.advance(60_000);
    assert.equal((await hitBySum(kv, SUMMED, "key_1", clock.now())).remaining, 2);
  });
});

Deno.test("admitBySum: concurrent hits are all counted, with no retry; over-admission is bounded by the hits in flight", async () => {
  await withKv(async (kv) => {
    const now = testClock().now();
    const policy: RateLimitPolicy = { ...SUMMED, limit: 20 };
    // 50 decisions read the same empty window before any count commits: all are admitted, and
    // every one is counted, so the window is closed to whatever comes next.
    const decisions = await Promise.all(
      Array.from({ length: 50 }, () => admitBySum(kv, policy, "key_1", now)),
    );
    assert.equal(decisions.filter((d) => d.allowed).length, 50);
    await Promise.all(decisions.map(async (d) => {
      const op = kv.atomic();
      d.count(op);
      assert.ok((await op.commit()).ok);
    }));
    const windowStart = Math.floor(now.getTime() / 60_000) * 60_000;
    const counter = await kv.get<Deno.KvU64>(rateCounterKey("api", "key_1", windowStart));
    assert.equal(counter.value?.value, 50n);
    assert.equal((await admitBySum(kv, policy, "key_1", now)).allowed, false);
  });
});

Deno.test("admitBySum: the first hit of a window removes the subject's older windows only", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    await hitBySum(kv, SUMMED, "key_1", clock.now());
    await hitBySum(kv, SUMMED, "key_2", clock.now());
    clock.advance(5 * 60_000);
    await hitBySum(kv, SUMMED, "key_1", clock.now());
    const left = await Array.fromAsync(kv.list({ prefix: ["rate_counters"] }), (e) => e.key);
    const start = Date.parse("2026-11-21T12:00:00.000Z");
    assert.deepEqual(left, [
      rateCounterKey("api", "key_1", start + 5 * 60_000),
      rateCounterKey("api", "key_2", start),
    ]);
  });
});

Deno.test("rateLimit middleware, sum-counted: headers and 429 as the exact limiter, counting at once without a meter", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    clock.advance(20_000);
    const app = new Hono<AppEnv>();
    app.onError(onError);
    app.use(rateLimit({
      kv,
      now: clock.now,
      rules: [{
        policy: { name: "mw", limit: 2, windowMs: 60_000, counting: "sum" },
        subject: () => "s1",
      }],
    }));
    app.get("/", (c) => c.text("ok"));
    for (const remaining of ["1", "0"]) {
      const res = await app.request("/");
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("ratelimit-remaining"), remaining);
      await res.body?.cancel();
    }
    const limited = await app.request("/");
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get("retry-after"), "40");
    assert.equal((await errorBody(limited)).error, "rate_limited");
  });
});

Deno.test("hitRateLimits: a brand ceiling holds across its keys; a refused hit is counted by none", async () => {
  await withKv(async (kv) => {
    const now = testClock().now();
    const key: RateLimitPolicy = { name: "sync", limit: 2, windowMs: 60_000 };
    const brand: RateLimitPolicy = { name: "sync_brand", limit: 3, windowMs: 60_000 };
    const hit = (keyId: string, brandId = "brand_a") =>
      hitRateLimits(
        kv,
        [{ policy: key, subject: keyId }, { policy: brand, subject: brandId }],
        now,
      );
    const first = await hit("key_1");
    assert.deepEqual([first.allowed, first.policy.name, first.remaining], [true, "sync", 1]);
    assert.equal((await hit("key_1")).allowed, true);
    const keyFull = await hit("key_1");
    assert.deepEqual([keyFull.allowed, keyFull.policy.name], [false, "sync"]);
    // A fresh key of the same brand meets the brand's ceiling: new keys add no allowance.
    const third = await hit("key_2");
    assert.deepEqual([third.allowed, third.policy.name, third.remaining], [true, "sync_brand", 0]);
    const brandFull = await hit("key_3");
    assert.deepEqual([brandFull.allowed, brandFull.policy.name], [false, "sync_brand"]);
    assert.equal((await kv.get(rateLimitKey("sync", "key_3", now.getTime()))).value, null);
    assert.equal((await kv.get(rateLimitKey("sync_brand", "brand_a", now.getTime()))).value, 3);
    // Another brand has its own ceiling.
    assert.equal((await hit("key_9", "brand_b")).allowed, true);
  });
});

Deno.test("rateLimit middleware, per key and per brand: the tightest headers; a brand refusal counts neither", async () => {
  await withKv(async (kv) => {
    const clock = testClock();
    const app = new Hono<AppEnv>();
    app.onError(onError);
    app.use(rateLimit({
      kv,
      now: clock.now,
      rules: [
        {
          policy: { name: "k", limit: 3, windowMs: 60_000, counting: "sum" },
          subject: (c) => c.req.header("x-key") ?? null,
          per: "key",
        },
        {
          policy: { name: "b", limit: 4, windowMs: 60_000, counting: "sum" },
          subject: () => "brand_a",
          per: "brand",
        },
      ],
    }));
    app.get("/", (c) => c.text("ok"));
    const ask = (key: string) => app.request("/", { headers: { "x-key": key } });
    const remaining: string[] = [];
    for (const key of ["k1", "k1", "k2", "k3"]) {
      const res = await ask(key);
      assert.equal(res.status, 200);
      remaining.push(res.headers.get("ratelimit-remaining")!);
    }
    // k1: 2 left of its 3, then 1; the brand: 1 left of 4, then 0.
    assert.deepEqual(remaining, ["2", "1", "1", "0"]);
    const limited = await ask("k4");
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get("ratelimit-limit"), "4");
    assert.match((await errorBody(limited)).error_description, /per brand/);
    const start = clock.now().getTime();
    assert.equal((await kv.get(rateCounterKey("k", "k4", start))).value, null);
  });
});
