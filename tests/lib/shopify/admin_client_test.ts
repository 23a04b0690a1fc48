import assert from "node:assert/strict";
import { DomainError } from "../../../lib/errors.ts";
import { type HttpError, toHttpError } from "../../../lib/http/errors.ts";
import {
  createShopifyAdmin,
  gidTail,
  parseProductId,
  type ShopifyAdmin,
  type ShopifyAdminOptions,
} from "../../../lib/shopify/admin_client.ts";
import {
  accessDenied,
  catalog,
  type FakeAdminApi,
  http429,
  startFakeAdminApi,
  throttled,
} from "./fake_admin_api.ts";

const SHOP = "acme.myshopify.com";
const TOKEN = "shpat_acme_secret_0123456789";
const creds = { shop: SHOP, accessToken: TOKEN };

/** Runs `fn` with a fake holding `products` for SHOP and a client whose sleeps are recorded. */
async function withClient(
  fn: (client: ShopifyAdmin, fake: FakeAdminApi, sleeps: number[]) => Promise<void>,
  options: Partial<ShopifyAdminOptions> = {},
  products = catalog(7),
): Promise<void> {
  const fake = startFakeAdminApi();
  fake.addShop(SHOP, TOKEN, products);
  const sleeps: number[] = [];
  const client = createShopifyAdmin({
    adminOrigin: fake.origin,
    apiVersion: fake.apiVersion,
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
    ...options,
  });
  try {
    await fn(client, fake, sleeps);
  } finally {
    await fake.close();
  }
}

/** Awaits a domain failure, and answers it as the edge does (`toHttpError`). */
async function assertHttpError(
  promise: Promise<unknown>,
  status: number,
  code: string,
): Promise<HttpError> {
  try {
    await promise;
  } catch (thrown) {
    assert.ok(thrown instanceof DomainError, String(thrown));
    const err = toHttpError(thrown);
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code);
    assert.ok(!err.message.includes(TOKEN), "the token must not appear in errors");
    return err;
  }
  throw new Error(`expected ${status} ${code}, got success`);
}

Deno.test("gidTail and parseProductId", () => {
  assert.equal(gidTail("gid://shopify/Product/632910392"), "632910392");
  assert.equal(gidTail("gid://shopify/ProductImage/7?width=10"), "7");
  assert.equal(gidTail("plain"), "plain");
  assert.equal(parseProductId("632910392"), "632910392");
  assert.equal(parseProductId("gid://shopify/Product/632910392"), "632910392");
  for (const bad of ["gid://shopify/Order/1", "abc", "12a", "", "-1", "1".repeat(21)]) {
    assert.equal(parseProductId(bad), null, bad);
  }
});

Deno.test("admin client: pages through products with Shopify's cursors, normalized", async () => {
  await withClient(async (client, fake) => {
    const first = await client.listProducts(creds, { first: 3 });
    assert.deepEqual(first.list.map((p) => p.id), ["1001", "1002", "1003"]);
    assert.ok(first.nextCursor);
    assert.deepEqual(first.list[0], {
      id: "1001",
      title: "Product 1001",
      status: "ACTIVE",
      variants: [
        { id: "10011", price: "19.99", sku: "SKU-1001-S" },
        { id: "10012", price: "21.00", sku: null },
      ],
      images: [{ id: "100100", url: "https://cdn.example/1001.png", altText: null }],
    });
    const second = await client.listProducts(creds, { first: 3, after: first.nextCursor });
    assert.deepEqual(second.list.map((p) => p.id), ["1004", "1005", "1006"]);
    const third = await client.listProducts(creds, { first: 3, after: second.nextCursor! });
    assert.deepEqual(third.list.map((p) => p.id), ["1007"]);
    assert.equal(third.nextCursor, null);

    assert.deepEqual(fake.violations, []);
    assert.deepEqual(fake.requests.map((r) => r.variables), [
      { first: 3 },
      { first: 3, after: first.nextCursor },
      { first: 3, after: second.nextCursor },
    ]);
    assert.ok(fake.requests.every((r) => r.token === TOKEN && r.operation === "products"));
  });
});

Deno.test("admin client: one product by GID; null when Shopify has none", async () => {
  await withClient(async (client, fake) => {
    const product = await client.getProduct(creds, "1002");
    assert.equal(product?.id, "1002");
    assert.equal(product?.title, "Product 1002");
    assert.equal(await client.getProduct(creds, "999"), null);
    assert.deepEqual(fake.requests.map((r) => [r.operation, r.variables]), [
      ["product", { id: "gid://shopify/Product/1002" }],
      ["product", { id: "gid://shopify/Product/999" }],
    ]);
    assert.deepEqual(fake.violations, []);
  });
});

Deno.test("admin client: fields outside the normalized shape are dropped", async () => {
  await withClient(async (client, fake) => {
    fake.extraFields = true;
    const [product] = (await client.listProducts(creds, { first: 1 })).list;
    assert.deepEqual(Object.keys(product!).sort(), ["id", "images", "status", "title", "variants"]);
    assert.deepEqual(Object.keys(product!.variants[0]!).sort(), ["id", "price", "sku"]);
    assert.deepEqual(Object.keys(product!.images[0]!).sort(), ["altText", "id", "url"]);
  });
});

Deno.test("admin client: {shop} in the origin is replaced; a trailing slash is tolerated", async () => {
  await withClient(async (_client, fake) => {
    const client = createShopifyAdmin({
      adminOrigin: `${fake.origin}/shops/{shop}/`,
      apiVersion: fake.apiVersion,
    });
    await client.listProducts(creds, { first: 1 });
    assert.equal(fake.requests[0]?.pathShop, SHOP);
    assert.deepEqual(fake.violations, []);
  });
});

Deno.test("admin client: THROTTLED waits (needed - available) / restoreRate, then succeeds", async () => {
  await withClient(async (client, fake, sleeps) => {
    fake.script.push(() => throttled({ requested: 752, available: 666, rate: 50 }));
    const page = await client.listProducts(creds, { first: 2 });
    assert.deepEqual(page.list.map((p) => p.id), ["1001", "1002"]);
    assert.deepEqual(sleeps, [1720]);
    assert.equal(fake.requests.length, 2);
  });
});

Deno.test("admin client: THROTTLED every time is 429 after the bounded retries, waits capped", async () => {
  await withClient(async (client, fake, sleeps) => {
    for (let i = 0; i < 5; i++) {
      fake.script.push(() => throttled({ requested: 1000, available: 0, rate: 50 }));
    }
    const err = await assertHttpError(
      client.listProducts(creds, { first: 2 }),
      429,
      "rate_limited",
    );
    // 20 s is what the bucket needs; each wait here is capped at 2 s, the caller is told 20.
    assert.deepEqual(sleeps, [2000, 2000]);
    assert.equal(err.headers["Retry-After"], "20");
    assert.equal(fake.requests.length, 3);
  });
});

Deno.test("admin client: HTTP 429 honours Retry-After, bounded; maxRetries 0 does not retry", async () => {
  await withClient(async (client, fake, sleeps) => {
    fake.script.push(() => http429("1.5"), () => http429("1.5"), () => http429("1.5"));
    const err = await assertHttpError(client.getProduct(creds, "1001"), 429, "rate_limited");
    assert.deepEqual(sleeps, [1500, 1500]);
    assert.equal(err.headers["Retry-After"], "2");
    assert.equal(fake.requests.length, 3);
  });
  await withClient(async (client, fake, sleeps) => {
    fake.script.push(() => http429());
    const err = await assertHttpError(client.getProduct(creds, "1001"), 429, "rate_limited");
    assert.deepEqual(sleeps, []);
    assert.equal(err.headers["Retry-After"], "1");
    assert.equal(fake.requests.length, 1);
  }, { maxRetries: 0 });
  await withClient(async (client, fake, sleeps) => {
    fake.script.push(() => http429());
    assert.equal((await client.getProduct(creds, "1001"))?.id, "1001");
    assert.deepEqual(sleeps, [1000]);
  });
});

Deno.test("admin client: ACCESS_DENIED and HTTP 401/403 are 403 forbidden", async () => {
  await withClient(async (client, fake) => {
    fake.script.push(accessDenied);
    await assertHttpError(client.listProducts(creds, { first: 1 }), 403, "forbidden");
    fake.script.push(() => Response.json({ errors: "Forbidden" }, { status: 403 }));
    await assertHttpError(client.listProducts(creds, { first: 1 }), 403, "forbidden");
    // An unknown token: the fake answers 401 as Shopify does.
    await assertHttpError(
      client.listProducts({ shop: SHOP, accessToken: "shpat_wrong" }, { first: 1 }),
      403,
      "forbidden",
    );
  });
});

Deno.test("admin client: 5xx, malformed JSON, odd shapes, GraphQL errors and network failures are 502", async () => {
  await withClient(async (client, fake, sleeps) => {
    const answers = [
      () => new Response("oops", { status: 500 }),
      () => new Response("upstream", { status: 503 }),
      () => new Response("{not json", { headers: { "Content-Type": "application/json" } }),
      () => Response.json({ data: { products: { nodes: [{ id: 1 }] } } }),
      () => Response.json({ data: null }),
      () => Response.json({ errors: [{ message: "Internal error", extensions: {} }] }),
      () => Response.json({ errors: "Not Found" }, { status: 404 }),
    ];
    for (const answer of answers) {
      fake.script.push(answer);
      await assertHttpError(client.listProducts(creds, { first: 1 }), 502, "upstream_error");
    }
    assert.deepEqual(sleeps, [], "upstream failures are not retried");
  });
});

Deno.test("admin client: a slow Shopify times out (502); an unreachable one is 502", async () => {
  await withClient(async (client, fake) => {
    fake.script.push(() =>
      new Promise((resolve) => setTimeout(() => resolve(Response.json({ data: null })), 300))
    );
    const err = await assertHttpError(
      client.listProducts(creds, { first: 1 }),
      502,
      "upstream_error",
    );
    assert.match(err.message, /did not answer within 50 ms/);
  }, { timeoutMs: 50 });
  const gone = startFakeAdminApi();
  await gone.close();
  const client = createShopifyAdmin({ adminOrigin: gone.origin, apiVersion: "2025-10" });
  await assertHttpError(client.listProducts(creds, { first: 1 }), 502, "upstream_error");
});

Deno.test("admin client: a cursor Shopify refuses is 400", async () => {
  await withClient(async (client) => {
    await assertHttpError(
      client.listProducts(creds, { first: 1, after: "bm90LWEtY3Vyc29y" }),
      400,
      "bad_request",
    );
  });
});
