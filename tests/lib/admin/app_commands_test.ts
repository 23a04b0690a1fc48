/** `deno task admin app-url`, run as a subprocess. */
import assert from "node:assert/strict";
import { verifySessionToken } from "../../../lib/tenancy/session_token.ts";
import { json, runCli, withStores } from "./cli_support.ts";

const APP = { SHOPIFY_API_KEY: "app-client-id", SHOPIFY_API_SECRET: "app-secret" };

Deno.test("cli: app-url mints a one-minute session token for the brand's shop and prints the /app URL", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(["brand", "create", "--name", "Acme", "--shop", "acme.myshopify.com"], env),
    );
    // Whole seconds: the token's times are JWT seconds.
    const before = Math.floor(Date.now() / 1000) * 1000;
    const printed = json(
      await runCli(["app-url", "--brand", String(brand.id), "--origin", "http://127.0.0.1:9000"], {
        ...env,
        ...APP,
      }),
    );
    const url = new URL(String(printed.url));
    assert.equal(url.origin + url.pathname, "http://127.0.0.1:9000/app");
    assert.equal(url.searchParams.get("shop"), "acme.myshopify.com");
    assert.equal(printed.shop, "acme.myshopify.com");
    const after = Date.now();
    const expires = Date.parse(String(printed.expires_at));
    assert.ok(expires >= before + 60_000 && expires <= after + 60_000, String(printed.expires_at));
    const claims = await verifySessionToken(url.searchParams.get("id_token")!, {
      apiKey: APP.SHOPIFY_API_KEY,
      apiSecret: APP.SHOPIFY_API_SECRET,
      now: new Date(),
    });
    assert.equal(claims.shop, "acme.myshopify.com");

    const noSecret = await runCli(["app-url", "--brand", String(brand.id)], env);
    assert.equal(noSecret.code, 1);
    assert.match(noSecret.stderr, /SHOPIFY_API_SECRET/);
    const missing = "01M86TDT9CSKW28VQJZ3VT7SDR";
    const unknown = await runCli(["app-url", "--brand", missing], { ...env, ...APP });
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, new RegExp(`no brand ${missing}`));
    assert.equal((await runCli(["app-url", "--brand", "nope"], env)).code, 2);
    assert.equal((await runCli(["app-url"], env)).code, 2);
  });
});
