import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { loadConfig } from "../../../lib/config.ts";
import { DomainError } from "../../../lib/errors.ts";
import { toHttpError } from "../../../lib/http/errors.ts";
import type { Product, ShopifyAdmin } from "../../../lib/shopify/admin_client.ts";
import { createProductReads, type ProductReads } from "../../../lib/shopify/product_reads.ts";
import { createBrand } from "../../../lib/tenancy/brands.ts";
import { lazyTokenCipher, openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { freshDatabase, type TestClock, testClock } from "../../test_support.ts";

const newId = monotonicFactory();
const SHOP = "reads.myshopify.com";
const TOKEN = "shpat_reads_token";

const product = (id: string): Product => ({
  id,
  title: `Product ${id}`,
  status: "ACTIVE",
  variants: [],
  images: [],
});

/** A client that counts its calls and records the token it was given. */
function fakeAdmin() {
  const calls: string[] = [];
  const tokens: string[] = [];
  const admin: ShopifyAdmin = {
    listProducts(credentials, page) {
      calls.push(`list:${page.first}:${page.after ?? ""}`);
      tokens.push(credentials.accessToken);
      return Promise.resolve({ list: [product("1")], nextCursor: null });
    },
    getProduct(credentials, id) {
      calls.push(`get:${id}`);
      tokens.push(credentials.accessToken);
      return Promise.resolve(id === "404" ? null : product(id));
    },
  };
  return { admin, calls, tokens };
}

async function withReads(
  options: { accessToken?: string; ttlSeconds?: string; encryptionKey?: string },
  fn: (
    reads: ProductReads,
    fake: ReturnType<typeof fakeAdmin>,
    brand: { brandId: string; scope: string },
    clock: TestClock,
  ) => Promise<void>,
) {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  const clock = testClock();
  try {
    const created = await createBrand(
      { sql: db.sql, newId, now: clock.now, cipher: await openTokenCipher(kv, undefined) },
      {
        name: "B",
        shop: SHOP,
        beta: true,
        ...(options.accessToken === undefined ? {} : { accessToken: options.accessToken }),
      },
    );
    const config = loadConfig({
      DATA_DIR: "/nonexistent",
      ...(options.ttlSeconds === undefined
        ? {}
        : { PRODUCT_CACHE_TTL_SECONDS: options.ttlSeconds }),
      ...(options.encryptionKey === undefined
        ? {}
        : { TOKEN_ENCRYPTION_KEY: options.encryptionKey }),
    });
    const fake = fakeAdmin();
    const reads = createProductReads({
      kv,
      sql: db.sql,
      now: clock.now,
      config,
      cipher: lazyTokenCipher(kv, config.tokenEncryptionKey),
      shopify: fake.admin,
    });
    await fn(reads, fake, { brandId: created.id, scope: SHOP }, clock);
  } finally {
    kv.close();
    await db.close();
  }
}

Deno.test("product reads: the stored token is decrypted for the client; answers are cached until their deadline", async () => {
  await withReads({ accessToken: TOKEN, ttlSeconds: "60" }, async (reads, fake, brand, clock) => {
    assert.equal((await reads.get(brand, "7"))?.id, "7");
    assert.equal((await reads.get(brand, "7"))?.id, "7");
    await reads.list(brand, { first: 5 });
    await reads.list(brand, { first: 5 });
    await reads.list(brand, { first: 5, after: "c1" });
    assert.deepEqual(fake.calls, ["get:7", "list:5:", "list:5:c1"]);
    assert.deepEqual(new Set(fake.tokens), new Set([TOKEN]));
    // Past the entry's own deadline on the service clock, the next read goes to Shopify.
    clock.advance(61_000);
    await reads.get(brand, "7");
    assert.deepEqual(fake.calls.at(-1), "get:7");
    assert.equal(fake.calls.length, 4);
  });
});

Deno.test("product reads: a product Shopify does not have is not cached; a TTL of 0 caches nothing", async () => {
  await withReads({ accessToken: TOKEN, ttlSeconds: "60" }, async (reads, fake, brand) => {
    assert.equal(await reads.get(brand, "404"), null);
    assert.equal(await reads.get(brand, "404"), null);
    assert.deepEqual(fake.calls, ["get:404", "get:404"]);
  });
  await withReads({ accessToken: TOKEN, ttlSeconds: "0" }, async (reads, fake, brand) => {
    await reads.get(brand, "7");
    await reads.get(brand, "7");
    assert.deepEqual(fake.calls, ["get:7", "get:7"]);
  });
});

Deno.test("product reads: without a stored token, forbidden before Shopify is called", async () => {
  await withReads({}, async (reads, fake, brand) => {
    await assert.rejects(reads.get(brand, "7"), (err: unknown) => {
      assert.ok(err instanceof DomainError);
      assert.equal(err.kind, "forbidden");
      assert.match(err.message, /no access token is stored/);
      return true;
    });
    assert.deepEqual(fake.calls, []);
  });
});

Deno.test("product reads: a token the configured key cannot decrypt is a 500 naming it, before Shopify", async () => {
  // Stored under the generated key; read with another (TOKEN_ENCRYPTION_KEY changed).
  const otherKey = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));
  await withReads({ accessToken: TOKEN, encryptionKey: otherKey }, async (reads, fake, brand) => {
    await assert.rejects(reads.get(brand, "7"), (err: unknown) => {
      assert.ok(err instanceof DomainError);
      assert.equal(err.kind, "internal");
      const answer = toHttpError(err);
      assert.deepEqual([answer.status, answer.code, answer.message], [
        500,
        "internal_error",
        "The stored access token cannot be decrypted",
      ]);
      return true;
    });
    assert.deepEqual(fake.calls, []);
  });
});
