import assert from "node:assert/strict";
import { setBrand } from "../../lib/tenancy/brands.ts";
import { loadConfig } from "../../lib/config.ts";
import { productCacheKey } from "../../lib/store/kv_keys.ts";
import { shopifyAdminFromConfig } from "../../lib/shopify/admin_client.ts";
import {
  accessDenied,
  catalog,
  type FakeAdminApi,
  http429,
  startFakeAdminApi,
  throttled,
} from "../lib/shopify/fake_admin_api.ts";
import { errorBody, type TestContext, withContext } from "../test_support.ts";

const TOKEN_A = "shpat_brand_a_0123456789abcdef";
const TOKEN_B = "shpat_brand_b_fedcba9876543210";

interface Setup {
  ctx: TestContext;
  fake: FakeAdminApi;
  /** Waits the client slept (only with `recordSleeps`). */
  sleeps: number[];
  /** A beta brand with a connected shop and TOKEN_A, whose catalog is 7 products (1001..1007). */
  a: Awaited<ReturnType<TestContext["seedBrand"]>>;
}

/**
 * A fake Admin API and an app pointed at it through SHOPIFY_ADMIN_ORIGIN. With `recordSleeps`
 * the app gets a client built from the same config whose waits are recorded, not slept.
 */
async function withShopify(
  fn: (setup: Setup) => Promise<void>,
  options: { env?: Record<string, string>; recordSleeps?: boolean; origin?: string } = {},
): Promise<void> {
  const fake = startFakeAdminApi();
  const sleeps: number[] = [];
  const env = {
    SHOPIFY_ADMIN_ORIGIN: options.origin?.replace("<fake>", fake.origin) ?? fake.origin,
    ...options.env,
  };
  const overrides = options.recordSleeps
    ? {
      shopify: shopifyAdminFromConfig(loadConfig({ DATA_DIR: "/nonexistent", ...env }), {
        sleep: (ms) => {
          sleeps.push(ms);
          return Promise.resolve();
        },
      }),
    }
    : {};
  try {
    await withContext(
      async (ctx) => {
        const a = await ctx.seedBrand({ accessToken: TOKEN_A });
        fake.addShop(a.scope!, TOKEN_A, catalog(7));
        await fn({ ctx, fake, sleeps, a });
        assert.deepEqual(fake.violations, []);
      },
      env,
      overrides,
    );
  } finally {
    await fake.close();
  }
}

const get = (ctx: TestContext, key: string, path: string) =>
  ctx.request(`/cdp/commerce/products${path}`, key);

async function json(res: Response, status = 200) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  return JSON.parse(text);
}

Deno.test("products: three pages with Shopify's cursors, then nextCursor null", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    const one = await json(await get(ctx, a.key, "?limit=3"));
    assert.deepEqual(one.list.map((p: { id: string }) => p.id), ["1001", "1002", "1003"]);
    assert.equal(one.pageSize, 3);
    assert.equal(one.scope, a.scope);
    assert.equal(typeof one.nextCursor, "string");
    assert.deepEqual(Object.keys(one).sort(), ["list", "nextCursor", "pageSize", "scope"]);
    const two = await json(
      await get(ctx, a.key, `?limit=3&cursor=${encodeURIComponent(one.nextCursor)}`),
    );
    assert.deepEqual(two.list.map((p: { id: string }) => p.id), ["1004", "1005", "1006"]);
    const three = await json(
      await get(ctx, a.key, `?limit=3&cursor=${encodeURIComponent(two.nextCursor)}`),
    );
    assert.deepEqual(three.list.map((p: { id: string }) => p.id), ["1007"]);
    assert.equal(three.nextCursor, null);
    assert.deepEqual(fake.requests.map((r) => r.variables), [
      { first: 3 },
      { first: 3, after: one.nextCursor },
      { first: 3, after: two.nextCursor },
    ]);
    assert.ok(fake.requests.every((r) => r.token === TOKEN_A), "the decrypted token is sent");
  });
});

Deno.test("products: limit defaults to 25, is clamped to 100; 0 or non-integers are 400", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    const all = await json(await get(ctx, a.key, ""));
    assert.equal(all.pageSize, 25);
    assert.equal(all.list.length, 7);
    assert.equal(all.nextCursor, null);
    assert.equal((await json(await get(ctx, a.key, "?limit=500"))).pageSize, 100);
    assert.deepEqual(fake.requests.map((r) => r.variables.first), [25, 100]);
    for (const bad of ["?limit=0", "?limit=-1", "?limit=abc", "?limit=1.5"]) {
      const res = await get(ctx, a.key, bad);
      assert.equal(res.status, 400, bad);
      const body = await errorBody(res);
      assert.equal(body.error, "bad_request");
      assert.match(body.error_description, /invalid page size/);
    }
    for (const bad of ["?cursor=%25%25", `?cursor=${"a".repeat(513)}`]) {
      const res = await get(ctx, a.key, bad);
      assert.equal(res.status, 400, bad);
      assert.equal((await errorBody(res)).error, "bad_request");
    }
    // A well-formed cursor Shopify refuses.
    const refused = await get(ctx, a.key, "?cursor=bm90LWEtY3Vyc29y");
    assert.equal(refused.status, 400);
    assert.equal((await errorBody(refused)).error, "bad_request");
    assert.equal(fake.requests.length, 3, "malformed input never reaches Shopify");
  });
});

Deno.test("products: one product by numeric id and by GID; 404 when missing", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    const byId = await json(await get(ctx, a.key, "/1002"));
    assert.deepEqual(byId, {
      id: "1002",
      title: "Product 1002",
      status: "ACTIVE",
      variants: [
        { id: "10021", price: "19.99", sku: "SKU-1002-S" },
        { id: "10022", price: "21.00", sku: null },
      ],
      images: [{ id: "100200", url: "https://cdn.example/1002.png", altText: null }],
    });
    const byGid = await json(
      await get(ctx, a.key, `/${encodeURIComponent("gid://shopify/Product/1003")}`),
    );
    assert.equal(byGid.id, "1003");
    assert.deepEqual(fake.requests.map((r) => r.variables), [
      { id: "gid://shopify/Product/1002" },
      { id: "gid://shopify/Product/1003" },
    ]);
    const missing = await get(ctx, a.key, "/999");
    assert.equal(missing.status, 404);
    assert.deepEqual(await errorBody(missing), {
      error: "not_found",
      error_description: "Product not found",
    });
    for (const bad of ["/abc", `/${encodeURIComponent("gid://shopify/Order/1")}`]) {
      const res = await get(ctx, a.key, bad);
      assert.equal(res.status, 404, bad);
      assert.equal((await errorBody(res)).error, "not_found");
    }
    assert.equal(fake.requests.length, 3, "ids that cannot be products never reach Shopify");
  });
});

Deno.test("products: read-through cache per shop, page and id, until the TTL on the clock", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    const first = await json(await get(ctx, a.key, "?limit=2"));
    assert.deepEqual(await json(await get(ctx, a.key, "?limit=2")), first);
    assert.equal(fake.requests.length, 1, "the second identical call is served from the cache");
    await json(await get(ctx, a.key, "?limit=3"));
    await json(await get(ctx, a.key, `?limit=2&cursor=${encodeURIComponent(first.nextCursor)}`));
    assert.equal(fake.requests.length, 3, "another size or cursor is another entry");
    await json(await get(ctx, a.key, "/1001"));
    await json(await get(ctx, a.key, "/1001"));
    await json(await get(ctx, a.key, `/${encodeURIComponent("gid://shopify/Product/1001")}`));
    assert.equal(fake.requests.length, 4, "a product is cached by id, whichever way it is named");
    // Misses are not cached.
    await get(ctx, a.key, "/999");
    await get(ctx, a.key, "/999");
    assert.equal(fake.requests.length, 6);

    ctx.clock.advance(59_000);
    await json(await get(ctx, a.key, "?limit=2"));
    assert.equal(fake.requests.length, 6, "still fresh at 59 s");
    ctx.clock.advance(2_000);
    await json(await get(ctx, a.key, "?limit=2"));
    await json(await get(ctx, a.key, "/1001"));
    assert.equal(fake.requests.length, 8, "past the 60 s TTL both are read again");
    await json(await get(ctx, a.key, "?limit=2"));
    assert.equal(fake.requests.length, 8, "and cached again");
  });
});

Deno.test("products: an unreadable cache entry is a miss, then overwritten", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    await ctx.kv.set(productCacheKey(a.scope!, "product", "1001"), new Uint8Array([1, 2, 3]));
    assert.equal((await json(await get(ctx, a.key, "/1001"))).id, "1001");
    assert.equal((await json(await get(ctx, a.key, "/1001"))).id, "1001");
    assert.equal(fake.requests.length, 1);
  });
});

Deno.test("products: PRODUCT_CACHE_TTL_SECONDS=0 turns the cache off", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    await json(await get(ctx, a.key, "?limit=2"));
    await json(await get(ctx, a.key, "?limit=2"));
    assert.equal(fake.requests.length, 2);
  }, { env: { PRODUCT_CACHE_TTL_SECONDS: "0" } });
});

Deno.test("products: THROTTLED once is retried after the cost-implied wait, then 200", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    // (752 - 666) / 100000 points per second: under a millisecond of real sleep.
    fake.script.push(() => throttled({ requested: 752, available: 666, rate: 100_000 }));
    const page = await json(await get(ctx, a.key, "?limit=2"));
    assert.deepEqual(page.list.map((p: { id: string }) => p.id), ["1001", "1002"]);
    assert.equal(fake.requests.length, 2);
  });
});

Deno.test("products: THROTTLED every time is 429 rate_limited with Retry-After, not cached", async () => {
  await withShopify(async ({ ctx, fake, sleeps, a }) => {
    for (let i = 0; i < 3; i++) {
      fake.script.push(() => throttled({ requested: 1000, available: 100, rate: 100 }));
    }
    const res = await get(ctx, a.key, "?limit=2");
    assert.equal(res.status, 429);
    assert.equal(res.headers.get("Retry-After"), "9");
    assert.equal((await errorBody(res)).error, "rate_limited");
    assert.equal(fake.requests.length, 3, "one call and SHOPIFY_MAX_RETRIES=2 retries");
    assert.deepEqual(sleeps, [2000, 2000], "each wait is capped at 2 s");
    await json(await get(ctx, a.key, "?limit=2"));
    assert.equal(fake.requests.length, 4, "the failure was not cached");
  }, { recordSleeps: true });
});

Deno.test("products: HTTP 429 is retried a bounded number of times, then 429", async () => {
  await withShopify(async ({ ctx, fake, sleeps, a }) => {
    for (let i = 0; i < 3; i++) fake.script.push(() => http429("3"));
    const res = await get(ctx, a.key, "/1001");
    assert.equal(res.status, 429);
    assert.equal(res.headers.get("Retry-After"), "3");
    assert.equal((await errorBody(res)).error, "rate_limited");
    assert.equal(fake.requests.length, 2, "SHOPIFY_MAX_RETRIES=1: one retry");
    assert.deepEqual(sleeps, [2000]);
  }, { recordSleeps: true, env: { SHOPIFY_MAX_RETRIES: "1" } });
});

Deno.test("products: a token that cannot read products, or none stored, is 403 forbidden", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    fake.script.push(accessDenied);
    const denied = await get(ctx, a.key, "");
    assert.equal(denied.status, 403);
    assert.deepEqual(await errorBody(denied), {
      error: "forbidden",
      error_description: "The storefront token cannot read products",
    });
    fake.script.push(() => Response.json({ errors: "Forbidden" }, { status: 403 }));
    assert.equal((await get(ctx, a.key, "/1001")).status, 403);
    const before = fake.requests.length;
    const tokenless = await ctx.seedBrand();
    for (const path of ["", "/1001"]) {
      const res = await get(ctx, tokenless.key, path);
      assert.equal(res.status, 403);
      assert.equal((await errorBody(res)).error, "forbidden");
    }
    assert.equal(fake.requests.length, before, "without a token nothing is sent");
  });
});

Deno.test("products: 5xx and malformed JSON from Shopify are 502 upstream_error", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    fake.script.push(
      () => new Response("Internal Server Error", { status: 500 }),
      () =>
        new Response('{"data": {"products": ', { headers: { "Content-Type": "application/json" } }),
    );
    for (const path of ["", "/1001"]) {
      const res = await get(ctx, a.key, path);
      assert.equal(res.status, 502, path);
      const body = await errorBody(res);
      assert.equal(body.error, "upstream_error");
      assert.doesNotMatch(body.error_description, /Internal Server Error|products/);
    }
    await json(await get(ctx, a.key, ""));
    assert.equal(fake.requests.length, 3, "failures are not cached");
  });
});

Deno.test("products: answers never carry the token, GIDs or fields outside the normalized shape", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    fake.extraFields = true;
    const texts: string[] = [];
    for (const path of ["?limit=5", "/1001", "/999"]) {
      texts.push(await (await get(ctx, a.key, path)).text());
    }
    fake.script.push(accessDenied, () => new Response("boom", { status: 500 }), () => http429("1"));
    for (const path of ["?limit=6", "?limit=7", "/1002", "/1002", "/1002"]) {
      texts.push(await (await get(ctx, a.key, path)).text());
    }
    for (const text of texts) {
      for (const leak of [TOKEN_A, "gid://", "vendor", "descriptionHtml", "inventoryQuantity"]) {
        assert.ok(!text.includes(leak), `${leak} in ${text}`);
      }
    }
    const page = JSON.parse(texts[0]!);
    for (const product of page.list) {
      assert.deepEqual(Object.keys(product).sort(), [
        "id",
        "images",
        "status",
        "title",
        "variants",
      ]);
      for (const v of product.variants) {
        assert.deepEqual(Object.keys(v).sort(), ["id", "price", "sku"]);
      }
      for (const i of product.images) {
        assert.deepEqual(Object.keys(i).sort(), ["altText", "id", "url"]);
      }
      assert.ok(product.variants.every((v: { price: unknown }) => typeof v.price === "string"));
    }
  });
});

Deno.test("products: the commerce gates come first and nothing reaches Shopify", async () => {
  await withShopify(async ({ ctx, fake }) => {
    const noBeta = await ctx.seedBrand({ beta: false, accessToken: "shpat_nobeta" });
    const noShop = await ctx.seedBrand({ shop: null });
    const disconnected = await ctx.seedBrand({ accessToken: "shpat_disconnected" });
    await setBrand(ctx.deps, { brandId: disconnected.brandId, integration: "disconnected" });
    for (const path of ["", "/1001"]) {
      const beta = await get(ctx, noBeta.key, path);
      assert.equal(beta.status, 403);
      assert.equal((await errorBody(beta)).error, "beta_not_enabled");
      for (const key of [noShop.key, disconnected.key]) {
        const res = await get(ctx, key, path);
        assert.equal(res.status, 403);
        assert.equal((await errorBody(res)).error, "integration_not_connected");
      }
      assert.equal((await get(ctx, "svc_nope", path)).status, 401);
    }
    const post = await ctx.request("/cdp/commerce/products", noBeta.key, { method: "POST" });
    assert.equal(post.status, 405);
    await post.body?.cancel();
    assert.equal(fake.requests.length, 0);
  });
});

Deno.test("products: each brand's token is used for its own shop only; caches do not mix", async () => {
  await withShopify(async ({ ctx, fake, a }) => {
    const b = await ctx.seedBrand({ accessToken: TOKEN_B });
    fake.addShop(b.scope!, TOKEN_B, catalog(2, 2000, "B product"));
    const pageA = await json(await get(ctx, a.key, "?limit=2"));
    const pageB = await json(await get(ctx, b.key, "?limit=2"));
    assert.deepEqual(pageA.list.map((p: { id: string }) => p.id), ["1001", "1002"]);
    assert.deepEqual(pageB.list.map((p: { id: string }) => p.id), ["2001", "2002"]);
    assert.equal(pageB.scope, b.scope);
    assert.equal(fake.requests.length, 2, "the same page of another shop is not a cache hit");
    assert.equal((await get(ctx, b.key, "/1001")).status, 404, "A's product is missing for B");
    assert.equal((await json(await get(ctx, b.key, "/2001"))).title, "B product 2001");
    assert.deepEqual(
      fake.requests.map((r) => [r.pathShop, r.tokenShop]),
      [[a.scope, a.scope], [b.scope, b.scope], [b.scope, b.scope], [b.scope, b.scope]],
    );
    assert.ok(!JSON.stringify(pageB).includes(TOKEN_B));
  }, { origin: "<fake>/shops/{shop}" });
});

Deno.test("products: both routes are in the OpenAPI document", async () => {
  await withShopify(async ({ ctx }) => {
    const doc = await json(await ctx.request("/openapi.json", null));
    assert.ok(doc.paths["/cdp/commerce/products"]?.get);
    assert.ok(doc.paths["/cdp/commerce/products/{id}"]?.get);
    assert.ok(doc.components.schemas.Product);
  });
});
