import assert from "node:assert/strict";
import { signSessionToken } from "../../lib/tenancy/session_token.ts";
import { summarizeUsage } from "../../lib/http/usage.ts";
import { errorBody, type TestContext, withContext } from "../test_support.ts";

const ENV = { SHOPIFY_API_KEY: "app-client-id", SHOPIFY_API_SECRET: "app-secret" };

/** A Shopify session token for the shop, valid at the context's clock. */
async function sessionToken(ctx: TestContext, shop: string, extra: Record<string, unknown> = {}) {
  const now = ctx.clock.now().getTime() / 1000;
  return await signSessionToken({
    iss: `https://${shop}/admin`,
    dest: `https://${shop}`,
    aud: ENV.SHOPIFY_API_KEY,
    sub: "1",
    exp: now + 60,
    nbf: now - 1,
    iat: now - 1,
    ...extra,
  }, ENV.SHOPIFY_API_SECRET);
}

function call(
  ctx: TestContext,
  token: string | null,
  method: string,
  path: string,
  body?: unknown,
) {
  return ctx.request(path, token, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }),
  });
}

const catalog = (ctx: TestContext, key: string) => ctx.request("/cdp/events/types", key);

Deno.test("keys: issue with a session token; the key works and is listed without secrets", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const token = await sessionToken(ctx, brand.scope!);
    const issued = await call(ctx, token, "POST", "/cdp/keys", { name: "backend" });
    assert.equal(issued.status, 201);
    const body = await issued.json();
    assert.match(body.key, /^svc_[0-9A-Za-z]{36}$/);
    assert.equal(body.name, "backend");
    assert.equal(body.scope, brand.scope);
    assert.equal(body.expires_at, null);
    assert.equal((await catalog(ctx, body.key)).status, 200);

    const anonymous = await call(ctx, token, "POST", "/cdp/keys");
    assert.equal(anonymous.status, 201);
    assert.equal((await anonymous.json()).name, null);

    const listed = await call(ctx, token, "GET", "/cdp/keys");
    assert.equal(listed.status, 200);
    const page = await listed.json();
    assert.equal(page.totalSize, 3);
    assert.equal(page.scope, brand.scope);
    assert.equal(page.nextCursor, null);
    const text = JSON.stringify(page);
    assert.ok(!text.includes(body.key) && !text.includes(brand.key));
    const entry = page.list.find((k: { id: string }) => k.id === body.id);
    assert.deepEqual(Object.keys(entry).sort(), [
      "created_at",
      "expires_at",
      "id",
      "last_used_at",
      "name",
      "prefix",
      "revoked_at",
    ]);
    assert.equal(entry.prefix, body.prefix);
    assert.equal(entry.last_used_at, ctx.clock.now().toISOString());
  }, ENV);
});

Deno.test("keys: API keys are refused on key routes; session tokens on data routes", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const withKey = await call(ctx, brand.key, "GET", "/cdp/keys");
    assert.equal(withKey.status, 401);
    assert.match((await errorBody(withKey)).error_description, /session token, not an API key/);
    const token = await sessionToken(ctx, brand.scope!);
    const onData = await ctx.request("/cdp/events/types", token);
    assert.equal(onData.status, 401);
    assert.match((await errorBody(onData)).error_description, /API key, not a session token/);
    assert.equal((await call(ctx, null, "GET", "/cdp/keys")).status, 401);
  }, ENV);
});

Deno.test("keys: invalid session tokens are 401; a shop without a brand is 401", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const shop = brand.scope!;
    const cases = [
      await sessionToken(ctx, shop, { exp: ctx.clock.now().getTime() / 1000 - 60 }),
      await sessionToken(ctx, shop, { nbf: ctx.clock.now().getTime() / 1000 + 60 }),
      await sessionToken(ctx, shop, { aud: "someone-else" }),
      await sessionToken(ctx, shop, { dest: "https://other.myshopify.com" }),
      await signSessionToken({
        dest: `https://${shop}`,
        iss: `https://${shop}/admin`,
        aud: ENV.SHOPIFY_API_KEY,
        exp: 9e9,
      }, "wrong-secret"),
      await sessionToken(ctx, "nobody.myshopify.com"),
    ];
    for (const token of cases) {
      const res = await call(ctx, token, "GET", "/cdp/keys");
      assert.equal(res.status, 401);
      assert.equal((await errorBody(res)).error, "unauthorized");
    }
  }, ENV);
});

Deno.test("keys: without the Shopify app credentials, key routes are 503", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const res = await call(ctx, await sessionToken(ctx, brand.scope!), "GET", "/cdp/keys");
    assert.equal(res.status, 503);
    assert.match((await errorBody(res)).error_description, /not configured/);
  });
});

Deno.test("keys: rotation keeps the old key for the grace period, then it stops", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const token = () => sessionToken(ctx, brand.scope!);
    const res = await call(ctx, await token(), "POST", "/cdp/keys/rotate", { id: brand.keyId });
    assert.equal(res.status, 201);
    const rotated = await res.json();
    assert.notEqual(rotated.id, brand.keyId);
    assert.equal(rotated.previous.id, brand.keyId);
    assert.equal(
      rotated.previous.expires_at,
      new Date(ctx.clock.now().getTime() + 3_600_000).toISOString(),
    );
    assert.equal((await catalog(ctx, rotated.key)).status, 200);
    ctx.clock.advance(3_600_000 - 1000);
    assert.equal((await catalog(ctx, brand.key)).status, 200);
    ctx.clock.advance(1000);
    assert.equal((await catalog(ctx, brand.key)).status, 401);
    assert.equal((await catalog(ctx, rotated.key)).status, 200);
    // An expired or revoked key cannot be rotated.
    const again = await call(ctx, await token(), "POST", "/cdp/keys/rotate", { id: brand.keyId });
    assert.equal(again.status, 409);
    assert.equal((await errorBody(again)).error, "conflict");
  }, { ...ENV, KEY_ROTATION_GRACE_SECONDS: "3600" });
});

Deno.test("keys: rotating a key again in its grace period is 409 naming the replacement", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const token = () => sessionToken(ctx, brand.scope!);
    const first = await call(ctx, await token(), "POST", "/cdp/keys/rotate", { id: brand.keyId });
    assert.equal(first.status, 201);
    const replacement = await first.json();
    ctx.clock.advance(60_000);
    const again = await call(ctx, await token(), "POST", "/cdp/keys/rotate", { id: brand.keyId });
    assert.equal(again.status, 409);
    const error = await errorBody(again);
    assert.equal(error.error, "conflict");
    assert.match(error.error_description, new RegExp(replacement.id));
    // No key was minted to expire with the grace: the replacement is the brand's only new key.
    const list = await (await call(ctx, await token(), "GET", "/cdp/keys")).json();
    assert.deepEqual(list.list.map((k: { id: string }) => k.id), [brand.keyId, replacement.id]);
    assert.equal(list.list[1].expires_at, null);
    // The old key still works until its grace ends, and the replacement can be rotated.
    assert.equal((await catalog(ctx, brand.key)).status, 200);
    const next = await call(ctx, await token(), "POST", "/cdp/keys/rotate", { id: replacement.id });
    assert.equal(next.status, 201);
    await next.body?.cancel();
  }, { ...ENV, KEY_ROTATION_GRACE_SECONDS: "3600" });
});

Deno.test("keys: revocation applies to the very next request; delete needs a dead key", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const token = await sessionToken(ctx, brand.scope!);
    // Used once first, so that the service knows the key's id and brand ahead of its record.
    assert.equal((await catalog(ctx, brand.key)).status, 200);
    assert.equal((await catalog(ctx, brand.key)).status, 200);
    const live = await call(ctx, token, "DELETE", `/cdp/keys?id=${brand.keyId}`);
    assert.equal(live.status, 409);
    assert.match((await errorBody(live)).error_description, /revoke it first/);
    const revoked = await call(ctx, token, "POST", "/cdp/keys/revoke", { id: brand.keyId });
    assert.equal(revoked.status, 200);
    const record = await revoked.json();
    assert.equal(record.revoked_at, ctx.clock.now().toISOString());
    assert.equal(record.key, undefined);
    assert.equal((await catalog(ctx, brand.key)).status, 401);
    assert.equal(
      (await call(ctx, token, "POST", "/cdp/keys/revoke", { id: brand.keyId })).status,
      200,
    );
    const deleted = await call(ctx, token, "DELETE", `/cdp/keys?id=${brand.keyId}`);
    assert.equal(deleted.status, 204);
    assert.equal((await catalog(ctx, brand.key)).status, 401);
    assert.equal((await (await call(ctx, token, "GET", "/cdp/keys")).json()).totalSize, 0);
    assert.equal((await call(ctx, token, "DELETE", `/cdp/keys?id=${brand.keyId}`)).status, 404);
    assert.equal(
      (await call(ctx, token, "POST", "/cdp/keys/revoke", { id: brand.keyId })).status,
      404,
    );
  }, ENV);
});

Deno.test("keys: one brand never lists, rotates, revokes or deletes another's keys", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    const tokenB = await sessionToken(ctx, b.scope!);
    const listed = await (await call(ctx, tokenB, "GET", "/cdp/keys")).json();
    assert.deepEqual(listed.list.map((k: { id: string }) => k.id), [b.keyId]);
    for (
      const [method, path, body] of [
        ["POST", "/cdp/keys/rotate", { id: a.keyId }],
        ["POST", "/cdp/keys/revoke", { id: a.keyId }],
        ["DELETE", `/cdp/keys?id=${a.keyId}`, undefined],
      ] as const
    ) {
      const res = await call(ctx, tokenB, method, path, body);
      assert.equal(res.status, 404, path);
      assert.deepEqual(await errorBody(res), {
        error: "not_found",
        error_description: "Key not found",
      });
    }
    assert.equal((await catalog(ctx, a.key)).status, 200);
  }, ENV);
});

Deno.test("keys: bad input gets the envelope; requests are metered under `keys`", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const token = await sessionToken(ctx, brand.scope!);
    const cases: [string, string, unknown][] = [
      ["POST", "/cdp/keys", { name: "" }],
      ["POST", "/cdp/keys", { name: "x", unknown: 1 }],
      ["POST", "/cdp/keys", { expires_at: "tomorrow" }],
      ["POST", "/cdp/keys", { expires_at: "2020-01-01T00:00:00Z" }],
      ["POST", "/cdp/keys/rotate", {}],
      ["POST", "/cdp/keys/revoke", { id: 5 }],
      ["DELETE", "/cdp/keys", undefined],
      ["GET", "/cdp/keys?limit=0", undefined],
    ];
    for (const [method, path, body] of cases) {
      const res = await call(ctx, token, method, path, body);
      assert.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body)}`);
      assert.equal((await errorBody(res)).error, "bad_request");
    }
    const expiring = await call(ctx, token, "POST", "/cdp/keys", {
      expires_at: "2027-01-01T00:00:00Z",
    });
    assert.equal((await expiring.json()).expires_at, "2027-01-01T00:00:00.000Z");
    assert.equal((await ctx.app.request("/cdp/keys", { method: "PUT" })).status, 405);
    const usage = await summarizeUsage(ctx.kv, brand.brandId);
    assert.deepEqual(usage.map((u) => [u.family, u.requests]), [["keys", cases.length + 1]]);
  }, ENV);
});

Deno.test("throttles: the query throttle answers 429 with Retry-After on query routes only", async () => {
  await withContext(async (ctx) => {
    // A stand-in query route: the query API arrives with the profiles issue; the throttle is
    // registered by createApp for every /cdp/query/* route.
    ctx.app.post("/cdp/query/:itemType/count", (c) => c.json({ count: 0 }));
    const brand = await ctx.seedBrand();
    const query = () => ctx.request("/cdp/query/profile/count", brand.key, { method: "POST" });
    assert.equal((await query()).status, 200);
    assert.equal((await query()).status, 200);
    const limited = await query();
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    assert.equal((await errorBody(limited)).error, "rate_limited");
    assert.equal((await catalog(ctx, brand.key)).status, 200);
    ctx.clock.advance(60_000);
    assert.equal((await query()).status, 200);
  }, { QUERY_RATE_LIMIT_PER_MINUTE: "2" });
});
