import assert from "node:assert/strict";
import { DomainError } from "../../../lib/errors.ts";
import { toHttpError } from "../../../lib/http/errors.ts";
import {
  brandOfSessionToken,
  looksLikeJwt,
  signSessionToken,
  verifySessionToken,
} from "../../../lib/tenancy/session_token.ts";
import { withBrandDatabase } from "../../test_support.ts";

const SECRET = "app-secret";
const API_KEY = "app-client-id";
const NOW = new Date("2026-11-21T12:00:00Z");
const T = NOW.getTime() / 1000;

function claims(extra: Record<string, unknown> = {}) {
  return {
    iss: "https://acme.myshopify.com/admin",
    dest: "https://acme.myshopify.com",
    aud: API_KEY,
    sub: "42",
    exp: T + 60,
    nbf: T - 5,
    iat: T - 5,
    jti: "jti-1",
    sid: "sid-1",
    ...extra,
  };
}

const options = { apiKey: API_KEY, apiSecret: SECRET, now: NOW };

async function rejects(token: string, reason: RegExp) {
  await assert.rejects(verifySessionToken(token, options), (err: unknown) => {
    assert.ok(err instanceof DomainError);
    assert.equal(toHttpError(err).status, 401);
    assert.equal(toHttpError(err).code, "unauthorized");
    assert.equal(
      toHttpError(err).headers["WWW-Authenticate"],
      'Bearer realm="cdp-keys", error="invalid_token"',
    );
    assert.match(err.message, reason);
    return true;
  });
}

Deno.test("session token: a valid token gives the shop, user and token id", async () => {
  const token = await signSessionToken(claims(), SECRET);
  assert.ok(looksLikeJwt(token));
  assert.deepEqual(await verifySessionToken(token, options), {
    shop: "acme.myshopify.com",
    sub: "42",
    jti: "jti-1",
  });
  // aud may be a list.
  const listed = await signSessionToken(claims({ aud: ["other", API_KEY] }), SECRET);
  assert.equal((await verifySessionToken(listed, options)).shop, "acme.myshopify.com");
});

Deno.test("session token: exp and nbf are checked with a few seconds of leeway", async () => {
  await verifySessionToken(await signSessionToken(claims({ exp: T - 4 }), SECRET), options);
  await rejects(await signSessionToken(claims({ exp: T - 6 }), SECRET), /expired/);
  await verifySessionToken(await signSessionToken(claims({ nbf: T + 4 }), SECRET), options);
  await rejects(await signSessionToken(claims({ nbf: T + 6 }), SECRET), /not yet valid/);
  const { exp: _exp, ...noExp } = claims();
  await rejects(await signSessionToken(noExp, SECRET), /no exp/);
});

Deno.test("session token: wrong audience, dest or iss is refused", async () => {
  await rejects(await signSessionToken(claims({ aud: "another-app" }), SECRET), /another app/);
  await rejects(
    await signSessionToken(claims({ dest: "https://other.myshopify.com" }), SECRET),
    /same shop/,
  );
  await rejects(
    await signSessionToken(claims({ iss: "https://other.myshopify.com/admin" }), SECRET),
    /same shop/,
  );
  await rejects(
    await signSessionToken(claims({ dest: "http://acme.myshopify.com" }), SECRET),
    /same shop/,
  );
  await rejects(
    await signSessionToken(claims({ dest: "https://acme.example.com" }), SECRET),
    /same shop/,
  );
  await rejects(
    await signSessionToken(claims({ iss: "https://acme.myshopify.com/" }), SECRET),
    /same shop/,
  );
  await rejects(await signSessionToken(claims({ dest: undefined }), SECRET), /same shop/);
});

Deno.test("session token: dest and iss must be exactly https://<shop> (no port, user info)", async () => {
  const shop = "acme.myshopify.com";
  const variants = [
    `https://${shop}:443`,
    `https://${shop}:8443`,
    `https://evil@${shop}`,
    `https://evil:pw@${shop}`,
    `https://${shop}.`,
    `https://ACME.myshopify.com`,
    ` https://${shop}`,
    `https://${shop}?x=1`,
    `https://${shop}#x`,
    `https://${shop}/`,
  ];
  for (const dest of variants) {
    await rejects(await signSessionToken(claims({ dest }), SECRET), /same shop/);
  }
  for (const dest of variants) {
    const iss = dest.endsWith("/") ? `${dest}admin` : `${dest}/admin`;
    if (iss === `https://${shop}/admin`) continue;
    await rejects(await signSessionToken(claims({ iss }), SECRET), /same shop/);
  }
  await rejects(
    await signSessionToken(claims({ iss: `https://${shop}/admin/` }), SECRET),
    /same shop/,
  );
});

Deno.test("session token: alg none, other algorithms and bad signatures are refused", async () => {
  const encode = (v: unknown) =>
    btoa(JSON.stringify(v)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  await rejects(`${encode({ alg: "none", typ: "JWT" })}.${encode(claims())}.`, /algorithm "none"/);
  await rejects(
    await signSessionToken(claims(), SECRET, { alg: "HS512", typ: "JWT" }),
    /algorithm "HS512"/,
  );
  await rejects(await signSessionToken(claims(), SECRET, { alg: "RS256" }), /algorithm "RS256"/);
  await rejects(await signSessionToken(claims(), "another-secret"), /bad signature/);
  const good = await signSessionToken(claims(), SECRET);
  const [h, , s] = good.split(".");
  await rejects(
    `${h}.${
      encode(
        claims({ dest: "https://other.myshopify.com", iss: "https://other.myshopify.com/admin" }),
      )
    }.${s}`,
    /bad signature/,
  );
  await rejects(
    await signSessionToken(claims(), SECRET, { alg: "HS256", typ: "JWS" }),
    /not a JWT/,
  );
});

Deno.test("session token: malformed tokens are refused without a stack trace", async () => {
  for (const token of ["", "abc", "a.b", "a.b.c.d", "!!.??.**", `${btoa("{")}.e30.sig`]) {
    await rejects(token, /not a JWT|malformed|algorithm/);
  }
  assert.equal(looksLikeJwt("svc_abc"), false);
});

Deno.test("brandOfSessionToken: the brand of the token's shop; 401 for a shop without one; 503 unconfigured", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    const now = new Date("2026-11-21T12:00:00Z");
    const config = { shopify: { apiKey: "k", apiSecret: "s" } } as never;
    const token = (shop: string) =>
      signSessionToken({
        iss: `https://${shop}/admin`,
        dest: `https://${shop}`,
        aud: "k",
        exp: now.getTime() / 1000 + 60,
      }, "s");
    const deps = { sql, now: () => now, config };
    const found = await brandOfSessionToken(deps, await token("b.myshopify.com"));
    assert.equal(found.brand.brandId, brandId);
    assert.equal(found.claims.shop, "b.myshopify.com");
    await assert.rejects(
      brandOfSessionToken(deps, await token("nobody.myshopify.com")),
      (err: unknown) => err instanceof DomainError && toHttpError(err).status === 401,
    );
    await assert.rejects(
      brandOfSessionToken(
        { ...deps, config: { shopify: { apiKey: undefined, apiSecret: undefined } } as never },
        await token("b.myshopify.com"),
      ),
      (err: unknown) =>
        err instanceof DomainError && toHttpError(err).status === 503 &&
        toHttpError(err).code === "service_unavailable",
    );
  });
});
