import assert from "node:assert/strict";
import { Hono } from "hono";
import type { AppEnv } from "../../../lib/http/app_env.ts";
import {
  apiKeyAuth,
  requireCommerce,
  requireScope,
  sessionTokenAuth,
} from "../../../lib/http/auth.ts";
import { onError } from "../../../lib/http/errors.ts";
import { revokeApiKey } from "../../../lib/tenancy/api_keys.ts";
import { createBrandCache } from "../../../lib/tenancy/brands.ts";
import { signSessionToken } from "../../../lib/tenancy/session_token.ts";
import { errorBody, type TestContext, withContext } from "../../test_support.ts";

const ENV = { SHOPIFY_API_KEY: "app-client-id", SHOPIFY_API_SECRET: "app-secret" };

/** A small app: both authentications in front of routes that echo what they resolved. */
function authApp(ctx: TestContext): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.onError(onError);
  const brands = createBrandCache({ ttlMs: 60_000, now: ctx.deps.now });
  app.use("/key/*", apiKeyAuth<AppEnv>(ctx.deps, { brands }));
  app.use("/session/*", sessionTokenAuth<AppEnv>(ctx.deps));
  app.get("/key/auth", (c) => c.json(c.get("auth")));
  app.get("/key/scope", (c) => c.json({ scope: requireScope(c) }));
  app.get("/key/commerce", (c) => c.json({ scope: requireCommerce(c) }));
  app.get("/session/auth", (c) => c.json(c.get("auth")));
  return app;
}

function get(app: Hono<AppEnv>, path: string, token: string | null) {
  return app.request(path, { headers: token === null ? {} : { Authorization: `Bearer ${token}` } });
}

async function sessionToken(ctx: TestContext, shop: string): Promise<string> {
  const now = ctx.clock.now().getTime() / 1000;
  return await signSessionToken({
    iss: `https://${shop}/admin`,
    dest: `https://${shop}`,
    aud: ENV.SHOPIFY_API_KEY,
    sub: "7",
    exp: now + 60,
    nbf: now - 1,
    iat: now - 1,
  }, ENV.SHOPIFY_API_SECRET);
}

async function assertUnauthorized(res: Response, description: RegExp): Promise<void> {
  assert.equal(res.status, 401);
  assert.match(res.headers.get("WWW-Authenticate") ?? "", /^Bearer realm="cdp/);
  const body = await errorBody(res);
  assert.equal(body.error, "unauthorized");
  assert.match(body.error_description, description);
}

Deno.test("apiKeyAuth: a live key resolves its brand, scope and key id, again from the hint", async () => {
  await withContext(async (ctx) => {
    const app = authApp(ctx);
    const { brandId, scope, key, keyId } = await ctx.seedBrand();
    for (let i = 0; i < 2; i++) {
      const res = await get(app, "/key/auth", key);
      assert.equal(res.status, 200);
      const auth = await res.json();
      assert.equal(auth.brandId, brandId);
      assert.equal(auth.scope, scope);
      assert.equal(auth.keyId, keyId);
    }
    assert.deepEqual(await (await get(app, "/key/scope", key)).json(), { scope });
    assert.deepEqual(await (await get(app, "/key/commerce", key)).json(), { scope });
  });
});

Deno.test("apiKeyAuth: missing, malformed, session-token and revoked credentials are 401", async () => {
  await withContext(async (ctx) => {
    const app = authApp(ctx);
    const { brandId, key, keyId, scope } = await ctx.seedBrand();
    await assertUnauthorized(await get(app, "/key/auth", null), /Missing bearer/);
    await assertUnauthorized(await get(app, "/key/auth", "svc_nonsense"), /invalid, revoked/);
    await assertUnauthorized(
      await get(app, "/key/auth", await sessionToken(ctx, scope!)),
      /not a session token/,
    );
    assert.equal((await get(app, "/key/auth", key)).status, 200);
    await revokeApiKey(ctx.deps, { brandId, keyId });
    const revoked = await get(app, "/key/auth", key);
    assert.match(revoked.headers.get("WWW-Authenticate") ?? "", /error="invalid_token"/);
    await assertUnauthorized(revoked, /invalid, revoked or expired/);
  });
});

Deno.test("requireScope / requireCommerce: a brand without a shop or beta is 403", async () => {
  await withContext(async (ctx) => {
    const app = authApp(ctx);
    const unscoped = await ctx.seedBrand({ shop: null });
    const res = await get(app, "/key/auth", unscoped.key);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).scope, null);
    const scope = await get(app, "/key/scope", unscoped.key);
    assert.equal(scope.status, 403);
    assert.equal((await errorBody(scope)).error, "forbidden");
    const noBeta = await ctx.seedBrand({ beta: false });
    const commerce = await get(app, "/key/commerce", noBeta.key);
    assert.equal(commerce.status, 403);
    assert.equal((await errorBody(commerce)).error, "beta_not_enabled");
    const noShop = await get(app, "/key/commerce", unscoped.key);
    assert.equal(noShop.status, 403);
    assert.equal((await errorBody(noShop)).error, "integration_not_connected");
  });
});

Deno.test("sessionTokenAuth: a shop's token resolves its brand; API keys and unknown shops are 401", async () => {
  await withContext(async (ctx) => {
    const app = authApp(ctx);
    const { brandId, key, scope } = await ctx.seedBrand();
    const res = await get(app, "/session/auth", await sessionToken(ctx, scope!));
    assert.equal(res.status, 200);
    const auth = await res.json();
    assert.equal(auth.brandId, brandId);
    assert.equal(auth.keyId, `session:${scope}:7`);
    await assertUnauthorized(await get(app, "/session/auth", key), /not an API key/);
    await assertUnauthorized(await get(app, "/session/auth", null), /Missing bearer/);
    await assertUnauthorized(
      await get(app, "/session/auth", await sessionToken(ctx, "nobody.myshopify.com")),
      /No brand is connected/,
    );
    await assertUnauthorized(
      await get(app, "/session/auth", "e30.e30.c2ln"),
      /invalid session token/,
    );
  }, ENV);
});

Deno.test("sessionTokenAuth: without the app's credentials configured it is 503", async () => {
  await withContext(async (ctx) => {
    const app = authApp(ctx);
    const { scope } = await ctx.seedBrand();
    const res = await get(app, "/session/auth", await sessionToken(ctx, scope!));
    assert.equal(res.status, 503);
    assert.equal((await errorBody(res)).error, "service_unavailable");
  });
});
