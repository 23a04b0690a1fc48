import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  assertBrandWritable,
  BETA_COMMERCE,
  type BrandDeps,
  closeScopeWrites,
  createBrand,
  createBrandCache,
  createPixelShopCache,
  findBrandContext,
  findPixelShop,
  listBrands,
  parseShopDomain,
  scopeWritesClosed,
  setBrand,
} from "../../../lib/tenancy/brands.ts";
import type { Tx } from "../../../lib/store/db.ts";
import { brandVersionKey, shopVersionKey } from "../../../lib/store/kv_keys.ts";
import { DomainError } from "../../../lib/errors.ts";
import { toHttpError } from "../../../lib/http/errors.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { freshDatabase, type TestClock, testClock } from "../../test_support.ts";

/** Runs `fn` over a fresh database and a cipher keyed in a fresh KV; closes both. */
async function withBrands(
  fn: (deps: BrandDeps & { kv: Deno.Kv }, clock: TestClock) => Promise<void>,
) {
  const database = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  try {
    const clock = testClock();
    const cipher = await openTokenCipher(kv, undefined);
    await fn({ sql: database.sql, kv, newId: monotonicFactory(), now: clock.now, cipher }, clock);
  } finally {
    kv.close();
    await database.close();
  }
}

async function assertHttpError(promise: Promise<unknown>, status: number, code: string) {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof DomainError, `not a DomainError: ${err}`);
    const mapped = toHttpError(err);
    assert.equal(mapped.status, status);
    assert.equal(mapped.code, code);
    return true;
  });
}

async function rowCounts(deps: BrandDeps) {
  const [row] = await deps.sql<{ brands: number; integrations: number; permissions: number }[]>`
    select (select count(*)::int from brands) as brands,
           (select count(*)::int from integrations) as integrations,
           (select count(*)::int from brand_permissions) as permissions`;
  return row!;
}

Deno.test("parseShopDomain: normalizes *.myshopify.com and rejects everything else", () => {
  assert.equal(parseShopDomain("Acme.myshopify.com "), "acme.myshopify.com");
  assert.equal(parseShopDomain("  ACME-store-2.MYSHOPIFY.COM\n"), "acme-store-2.myshopify.com");
  assert.equal(parseShopDomain("0.myshopify.com"), "0.myshopify.com");
  for (
    const bad of [
      "",
      "   ",
      "acme.com",
      "myshopify.com",
      ".myshopify.com",
      "a.b.myshopify.com",
      "-x.myshopify.com",
      "x.myshopify.com.evil.com",
      "x_y.myshopify.com",
      "https://acme.myshopify.com",
      "acme.myshopify.com/admin",
      "acme.myshopify.co",
      "acmemyshopify.com",
      `${"a".repeat(64)}.myshopify.com`,
    ]
  ) {
    assert.equal(parseShopDomain(bad), null, JSON.stringify(bad));
  }
  assert.equal(
    parseShopDomain(`${"a".repeat(63)}.myshopify.com`),
    `${"a".repeat(63)}.myshopify.com`,
  );
});

Deno.test("createBrand: shop, beta and token → scope, beta and a connected integration", async () => {
  await withBrands(async (deps, clock) => {
    const brand = await createBrand(deps, {
      name: "  Acme  ",
      shop: "Acme.myshopify.com ",
      beta: true,
      accessToken: "shpat_secret_token_value",
    });
    assert.deepEqual(brand, { id: brand.id, name: "Acme", shop: "acme.myshopify.com" });
    assert.deepEqual(await findBrandContext(deps.sql, brand.id), {
      brandId: brand.id,
      name: "Acme",
      scope: "acme.myshopify.com",
      beta: true,
      integration: { status: "connected", isEnabled: true, redactedAt: null },
    });
    const [permission] = await deps.sql`
      select permission from brand_permissions where brand_id = ${brand.id}`;
    assert.equal(permission?.permission, BETA_COMMERCE);

    const [integration] = await deps.sql<
      { access_token_ciphertext: string; connected_at: Date; provider: string }[]
    >`select access_token_ciphertext, connected_at, provider from integrations
      where brand_id = ${brand.id}`;
    assert.ok(integration);
    assert.equal(integration.provider, "shopify");
    assert.equal(integration.connected_at.toISOString(), clock.now().toISOString());
    assert.notEqual(integration.access_token_ciphertext, "shpat_secret_token_value");
    assert.ok(!integration.access_token_ciphertext.includes("shpat_secret_token_value"));
    assert.equal(
      await deps.cipher.decrypt(integration.access_token_ciphertext),
      "shpat_secret_token_value",
    );
  });
});

Deno.test("createBrand: without shop or beta → no scope, no beta, no integration", async () => {
  await withBrands(async (deps) => {
    const brand = await createBrand(deps, { name: "Bare" });
    assert.equal(brand.shop, null);
    assert.deepEqual(await findBrandContext(deps.sql, brand.id), {
      brandId: brand.id,
      name: "Bare",
      scope: null,
      beta: false,
      integration: null,
    });
    const withShop = await createBrand(deps, { name: "Shop", shop: "shop.myshopify.com" });
    const context = await findBrandContext(deps.sql, withShop.id);
    assert.equal(context?.beta, false);
    assert.equal(context?.scope, "shop.myshopify.com");
    const [row] = await deps.sql`
      select access_token_ciphertext from integrations where brand_id = ${withShop.id}`;
    assert.equal(row?.access_token_ciphertext, null);
    assert.equal(await findBrandContext(deps.sql, "no-such-brand"), null);
  });
});

Deno.test("createBrand: a shop already taken → 409 conflict and nothing left behind", async () => {
  await withBrands(async (deps) => {
    const first = await createBrand(deps, {
      name: "First",
      shop: "acme.myshopify.com",
      beta: true,
    });
    const before = await rowCounts(deps);
    assert.deepEqual(before, { brands: 1, integrations: 1, permissions: 1 });
    // The same shop, spelled differently, is still the same shop.
    await assertHttpError(
      createBrand(deps, { name: "Second", shop: " ACME.myshopify.com", beta: true }),
      409,
      "conflict",
    );
    assert.deepEqual(await rowCounts(deps), before);
    const names = await deps.sql`select name from brands`;
    assert.deepEqual(names.map((r) => r.name), ["First"]);
    assert.equal((await findBrandContext(deps.sql, first.id))?.scope, "acme.myshopify.com");
  });
});

Deno.test("createBrand: concurrent creates of one shop → one brand, the other 409", async () => {
  await withBrands(async (deps) => {
    for (let i = 0; i < 5; i++) {
      const shop = `race-${i}.myshopify.com`;
      const results = await Promise.allSettled([
        createBrand(deps, { name: "A", shop, beta: true }),
        createBrand(deps, { name: "B", shop, beta: true }),
      ]);
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 1, shop);
      const loser = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      assert.ok(loser.reason instanceof DomainError, `${shop}: ${loser.reason}`);
      assert.equal(toHttpError(loser.reason).status, 409);
      assert.equal(toHttpError(loser.reason).code, "conflict");
    }
    assert.deepEqual(await rowCounts(deps), { brands: 5, integrations: 5, permissions: 5 });
  });
});

Deno.test("createBrand: invalid input → 400 bad_request and no rows", async () => {
  await withBrands(async (deps) => {
    await assertHttpError(createBrand(deps, { name: "X", shop: "acme.com" }), 400, "bad_request");
    await assertHttpError(createBrand(deps, { name: "X", shop: "" }), 400, "bad_request");
    await assertHttpError(createBrand(deps, { name: "   " }), 400, "bad_request");
    await assertHttpError(createBrand(deps, { name: "x".repeat(201) }), 400, "bad_request");
    await assertHttpError(createBrand(deps, { name: "X", accessToken: "t" }), 400, "bad_request");
    assert.deepEqual(await rowCounts(deps), { brands: 0, integrations: 0, permissions: 0 });
  });
});

Deno.test("setBrand: beta off and on, integration disconnected and reconnected", async () => {
  await withBrands(async (deps, clock) => {
    const brand = await createBrand(deps, { name: "Acme", shop: "acme.myshopify.com", beta: true });
    const connectedAt = async () => {
      const [row] = await deps.sql<{ connected_at: Date }[]>`
        select connected_at from integrations where brand_id = ${brand.id}`;
      return row!.connected_at.toISOString();
    };
    const created = clock.now().toISOString();

    clock.advance(1_000);
    assert.deepEqual(await setBrand(deps, { brandId: brand.id, beta: false }), {
      id: brand.id,
      name: "Acme",
      shop: "acme.myshopify.com",
      beta: false,
      integration: "connected",
      redacted_at: null,
    });
    assert.equal((await findBrandContext(deps.sql, brand.id))?.beta, false);
    // Turning it off twice is harmless.
    assert.equal((await setBrand(deps, { brandId: brand.id, beta: false })).beta, false);

    clock.advance(1_000);
    const disconnected = await setBrand(deps, { brandId: brand.id, integration: "disconnected" });
    assert.equal(disconnected.integration, "disconnected");
    assert.equal(disconnected.shop, "acme.myshopify.com", "the scope stays");
    assert.deepEqual((await findBrandContext(deps.sql, brand.id))?.integration, {
      status: "disconnected",
      isEnabled: true,
      redactedAt: null,
    });
    assert.equal(await connectedAt(), created);

    clock.advance(1_000);
    const reconnected = await setBrand(deps, {
      brandId: brand.id,
      integration: "connected",
      beta: true,
    });
    assert.equal(reconnected.integration, "connected");
    assert.equal(reconnected.beta, true);
    const reconnectedAt = clock.now().toISOString();
    assert.equal(await connectedAt(), reconnectedAt);

    // Connecting an already connected integration keeps its connected_at; granting twice is fine.
    clock.advance(1_000);
    const again = await setBrand(deps, { brandId: brand.id, integration: "connected", beta: true });
    assert.equal(again.beta, true);
    assert.equal(await connectedAt(), reconnectedAt);
    const [brandRow] = await deps.sql<{ updated_at: Date }[]>`
      select updated_at from brands where id = ${brand.id}`;
    assert.equal(brandRow?.updated_at.toISOString(), clock.now().toISOString());
  });
});

Deno.test("setBrand: an unknown brand → 404 not_found", async () => {
  await withBrands(async (deps) => {
    await assertHttpError(
      setBrand(deps, { brandId: "no-such-brand", beta: true }),
      404,
      "not_found",
    );
    assert.deepEqual(await rowCounts(deps), { brands: 0, integrations: 0, permissions: 0 });
  });
});

Deno.test("setBrand: an integration change on a brand without shop → 400, nothing applied", async () => {
  await withBrands(async (deps) => {
    const brand = await createBrand(deps, { name: "Bare" });
    await assertHttpError(
      setBrand(deps, { brandId: brand.id, integration: "connected" }),
      400,
      "bad_request",
    );
    // The beta grant in the same call is rolled back with the failed integration change.
    await assertHttpError(
      setBrand(deps, { brandId: brand.id, beta: true, integration: "disconnected" }),
      400,
      "bad_request",
    );
    const context = await findBrandContext(deps.sql, brand.id);
    assert.equal(context?.beta, false);
    assert.equal(context?.integration, null);
    // Beta alone works on a brand without a shop.
    assert.equal((await setBrand(deps, { brandId: brand.id, beta: true })).beta, true);
  });
});

Deno.test("brand cache: kept while the brand's version holds; a bump or the TTL reloads it", async () => {
  await withBrands(async (deps, clock) => {
    const brand = await createBrand(deps, { name: "Acme", shop: "acme.myshopify.com", beta: true });
    const cache = createBrandCache({ ttlMs: 60_000, now: clock.now });
    const version = async () => (await deps.kv.get(brandVersionKey(brand.id))).versionstamp;
    assert.equal((await cache.get(deps.sql, brand.id, await version()))!.beta, true);
    // A change behind the writers' back is not seen while the version holds...
    await deps.sql`delete from brand_permissions where brand_id = ${brand.id}`;
    assert.equal((await cache.get(deps.sql, brand.id, await version()))!.beta, true);
    // ...and is once the TTL has passed.
    clock.advance(60_000);
    assert.equal((await cache.get(deps.sql, brand.id, await version()))!.beta, false);
    // setBrand bumps the version after its commit: the next lookup sees the change at once.
    await setBrand(deps, { brandId: brand.id, integration: "disconnected" });
    const context = await cache.get(deps.sql, brand.id, await version());
    assert.equal(context!.integration?.status, "disconnected");
    assert.notEqual(await version(), null);
    // An unknown brand is never cached as present.
    assert.equal(await cache.get(deps.sql, "no-such-brand", null), null);
  });
});

Deno.test("pixel shop cache: unknown shops cached too; a writer's bump is seen at once, SQL by hand within the TTL", async () => {
  await withBrands(async (deps, clock) => {
    const cache = createPixelShopCache({ ttlMs: 30_000, now: clock.now });
    const shop = "acme.myshopify.com";
    const version = async () => (await deps.kv.get(shopVersionKey(shop))).versionstamp;
    const lookups = countQueries(deps.sql);
    // Unknown: one query, then answered from the cache.
    assert.equal(await cache.get(lookups.sql, shop, await version()), null);
    assert.equal(await cache.get(lookups.sql, shop, await version()), null);
    assert.equal(lookups.count(), 1);
    // Created through the writers (kv given): the version moved, the next lookup sees the shop.
    const brand = await createBrand(deps, { name: "Acme", shop });
    assert.equal((await cache.get(lookups.sql, shop, await version()))?.brandId, brand.id);
    assert.equal(lookups.count(), 2);
    // Disconnected and reconnected by setBrand: seen at once both ways.
    await setBrand(deps, { brandId: brand.id, integration: "disconnected" });
    assert.equal(await cache.get(lookups.sql, shop, await version()), null);
    await setBrand(deps, { brandId: brand.id, integration: "connected" });
    assert.equal((await cache.get(lookups.sql, shop, await version()))?.brandId, brand.id);
    // Origins set by SQL by hand: the cached shop holds until the TTL has passed.
    await deps.sql`update integrations set storefront_origins = array['https://shop.acme.example']
                   where shop_domain = ${shop}`;
    clock.advance(29_999);
    assert.deepEqual((await cache.get(lookups.sql, shop, await version()))?.origins, [
      `https://${shop}`,
    ]);
    clock.advance(1);
    assert.deepEqual((await cache.get(lookups.sql, shop, await version()))?.origins, [
      `https://${shop}`,
      "https://shop.acme.example",
    ]);
    // Concurrent lookups of a shop not cached share one query.
    const before = lookups.count();
    const shops = await Promise.all(
      [1, 2, 3].map(() => cache.get(lookups.sql, "new.myshopify.com", null)),
    );
    assert.deepEqual(shops, [null, null, null]);
    assert.equal(lookups.count(), before + 1);
  });
});

Deno.test("pixel shop cache: bounded, the least recently used entry goes first", async () => {
  await withBrands(async (deps, clock) => {
    const cache = createPixelShopCache({ ttlMs: 30_000, now: clock.now, max: 2 });
    const lookups = countQueries(deps.sql);
    await cache.get(lookups.sql, "a.myshopify.com", null);
    await cache.get(lookups.sql, "b.myshopify.com", null);
    await cache.get(lookups.sql, "a.myshopify.com", null); // a is now the most recent
    await cache.get(lookups.sql, "c.myshopify.com", null); // b goes
    assert.equal(lookups.count(), 3);
    await cache.get(lookups.sql, "a.myshopify.com", null);
    assert.equal(lookups.count(), 3);
    await cache.get(lookups.sql, "b.myshopify.com", null);
    assert.equal(lookups.count(), 4);
  });
});

/** `sql` as a tagged template that counts the statements sent through it. */
function countQueries(sql: BrandDeps["sql"]): { sql: BrandDeps["sql"]; count: () => number } {
  let count = 0;
  const counting = ((...args: Parameters<typeof sql>) => {
    count++;
    return sql(...args);
  }) as unknown as BrandDeps["sql"];
  return { sql: counting, count: () => count };
}

Deno.test("shop erasure: closes the scope's writes and the pixel; only reconnecting reopens them", async () => {
  await withBrands(async (deps, clock) => {
    const brand = await createBrand(deps, { name: "Acme", shop: "acme.myshopify.com" });
    const other = await createBrand(deps, { name: "Other", shop: "other.myshopify.com" });
    const closed = (scope: string) =>
      deps.sql.begin((tx) => scopeWritesClosed(tx as unknown as Tx, scope));
    assert.equal(await closed("acme.myshopify.com"), false);
    const erasedAt = clock.now();
    await deps.sql.begin(async (tx) => {
      await closeScopeWrites(tx as unknown as Tx, "acme.myshopify.com", erasedAt);
      await tx`update integrations set status = 'disconnected' where brand_id = ${brand.id}`;
    });
    assert.equal(await closed("acme.myshopify.com"), true);
    assert.equal(await closed("other.myshopify.com"), false);
    const context = (await findBrandContext(deps.sql, brand.id))!;
    assert.equal(context.integration?.redactedAt, erasedAt.toISOString());
    await assertHttpError(
      Promise.resolve().then(() => assertBrandWritable(context)),
      403,
      "forbidden",
    );
    assertBrandWritable((await findBrandContext(deps.sql, other.id))!);
    assert.equal((await listBrands(deps.sql, brand.id))[0]?.redacted_at, erasedAt.toISOString());

    // Disconnecting again (or the beta) does not reopen it; connecting does.
    await setBrand(deps, { brandId: brand.id, integration: "disconnected", beta: true });
    assert.equal(await closed("acme.myshopify.com"), true);
    // Even marked connected by hand, an erased shop takes no pixel events.
    await deps.sql`update integrations set status = 'connected' where brand_id = ${brand.id}`;
    assert.equal(await findPixelShop(deps.sql, "acme.myshopify.com"), null);
    const view = await setBrand(deps, { brandId: brand.id, integration: "connected" });
    assert.equal(view.redacted_at, null);
    assert.equal(await closed("acme.myshopify.com"), false);
    assert.equal((await findPixelShop(deps.sql, "acme.myshopify.com"))?.brandId, brand.id);
  });
});
