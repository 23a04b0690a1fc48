/** `shop sync`, `shop status` and `shop origins`, run as a subprocess as `deno task admin` runs them. */
import assert from "node:assert/strict";
import { DATABASE_URL, freshDatabase } from "../../test_support.ts";
import {
  bulkLineItem,
  bulkOrder,
  type FakeBulkApi,
  generatedCustomers,
  jsonl,
  startFakeBulkApi,
} from "../shopify/fake_bulk_api.ts";
import { json, runCli, withService, withStores } from "./cli_support.ts";

const SHOP = "cli-history.myshopify.com";
const TOKEN = "shpat_cli";

async function withCli(
  fn: (env: Record<string, string>, fake: FakeBulkApi, brandId: string) => Promise<void>,
) {
  const dataDir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  const fake = startFakeBulkApi(TOKEN);
  fake.pollsUntilDone = 0;
  try {
    const env = {
      DATA_DIR: dataDir,
      DATABASE_URL: database?.url ?? "",
      SHOPIFY_ADMIN_ORIGIN: fake.origin,
      SHOPIFY_API_VERSION: fake.apiVersion,
    };
    const brand = json(
      await runCli(
        ["brand", "create", "--name", "H", "--shop", SHOP, "--access-token", TOKEN],
        env,
      ),
    );
    await fn(env, fake, String(brand.id));
    assert.deepEqual(fake.violations, []);
  } finally {
    await fake.close();
    await database?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

Deno.test("cli: shop sync prints progress on stderr and one JSON object; shop status reads the state", async () => {
  await withCli(async (env, fake, brandId) => {
    fake.files.customers = () => generatedCustomers(2);
    fake.files.orders = () => jsonl(bulkLineItem(1, 0)) + jsonl(bulkOrder(1)) + jsonl(bulkOrder(2));
    const none = json(await runCli(["shop", "status", "--brand", brandId], env));
    assert.deepEqual(none, { brandId, status: "none" });

    const sync = await runCli(["shop", "sync", "--brand", brandId], env);
    assert.deepEqual(json(sync), {
      bulkOperationId: "gid://shopify/BulkOperation/4100001",
      orders: 2,
      customers: 2,
      lineItems: 1,
      rejected: [],
    });
    assert.match(
      sync.stderr,
      /customers: bulk operation gid:\/\/shopify\/BulkOperation\/4100000 COMPLETED/,
    );
    assert.match(
      sync.stderr,
      /orders: bulk operation gid:\/\/shopify\/BulkOperation\/4100001 COMPLETED/,
    );

    const status = json(await runCli(["shop", "status", "--brand", brandId], env));
    assert.equal(status.status, "completed");
    assert.equal(status.bulkOperationId, "gid://shopify/BulkOperation/4100001");
    assert.deepEqual(status.counts, { orders: 2, customers: 2, lineItems: 1, rejected: 0 });
    assert.equal(status.lastError, null);
  });
});

Deno.test("cli: shop sync exits non-zero on a FAILED operation and on a userError", async () => {
  await withCli(async (env, fake, brandId) => {
    fake.outcomes.push({ status: "FAILED", errorCode: "INTERNAL_SERVER_ERROR" });
    const failed = await runCli(["shop", "sync", "--brand", brandId, "--only", "orders"], env);
    assert.equal(failed.code, 1);
    assert.equal(failed.stdout, "");
    assert.match(failed.stderr, /error: bulk operation .* ended FAILED \(INTERNAL_SERVER_ERROR\)/);
    const status = json(await runCli(["shop", "status", "--brand", brandId], env));
    assert.equal(status.status, "failed");

    fake.userErrors.push("Bulk queries are not allowed for this shop.");
    const refused = await runCli(["shop", "sync", "--brand", brandId], env);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /error: Shopify refused the bulk query: Bulk queries are not allowed/,
    );
  });
});

Deno.test("cli: shop sync --background queues the job; bad flags are usage errors", async () => {
  await withCli(async (env, fake, brandId) => {
    const queued = json(
      await runCli(
        ["shop", "sync", "--brand", brandId, "--since", "2025-02-01", "--background"],
        env,
      ),
    );
    assert.equal(queued.status, "queued");
    assert.equal(queued.since, "2025-02-01");
    const status = json(await runCli(["shop", "status", "--brand", brandId], env));
    assert.equal(status.runId, queued.runId);
    assert.equal(status.status, "queued");
    assert.equal(fake.requests.length, 0, "the service's forwarder runs it, not the CLI");
    for (
      const args of [
        ["--brand", brandId, "--since", "2025-02-30"],
        ["--brand", brandId, "--only", "products"],
        ["--since", "2025-02-01"],
      ]
    ) {
      const usage = await runCli(["shop", "sync", ...args], env);
      assert.equal(usage.code, 2, usage.stderr);
    }
  });
});

Deno.test("cli: shop origins lists, adds (repeated or comma-separated) and removes; bad origins exit 1", async () => {
  await withStores(async (env) => {
    const shop = json(
      await runCli(["brand", "create", "--name", "A", "--shop", "acme.myshopify.com"], env),
    );
    const bare = json(await runCli(["brand", "create", "--name", "B"], env));
    const origins = (...args: string[]) =>
      runCli(["shop", "origins", "--brand", String(shop.id), ...args], env);
    assert.deepEqual(json(await origins()), {
      brand: shop.id,
      shop: "acme.myshopify.com",
      origins: [],
    });
    const a = "https://a.acme.example", b = "https://b.acme.example";
    const c = "https://c.acme.example:8443";
    assert.deepEqual(json(await origins("--add", `${a}, ${b}`, "--add", c)), {
      brand: shop.id,
      shop: "acme.myshopify.com",
      origins: [a, b, c],
      added: [a, b, c],
      removed: [],
    });
    assert.deepEqual(json(await origins("--add", a)).added, []);
    const removed = json(await origins("--remove", b));
    assert.deepEqual([removed.origins, removed.removed], [[a, c], [b]]);
    assert.deepEqual(json(await origins()).origins, [a, c]);

    // Refused with the reason, exit 1, nothing written.
    for (
      const [origin, reason] of [
        ["http://d.acme.example", /only https \(http only for localhost/],
        ["https://d.acme.example/shop", /did you mean https:\/\/d\.acme\.example\?/],
        ["https://D.acme.example", /lower case/],
        ["https://*.acme.example", /the host must be a domain name/],
      ] as const
    ) {
      const result = await origins("--add", `https://ok.acme.example,${origin}`);
      assert.equal(result.code, 1, result.stderr);
      assert.equal(result.stdout, "");
      assert.match(result.stderr, /^error: not a storefront origin: /);
      assert.match(result.stderr, reason);
    }
    assert.deepEqual(json(await origins()).origins, [a, c]);
    // A development storefront on loopback may be http.
    const dev = await runCli(
      ["shop", "origins", "--brand", String(shop.id), "--add", "http://127.0.0.1:8123"],
      env,
    );
    assert.deepEqual(json(dev).added, ["http://127.0.0.1:8123"]);

    const missing = await runCli(
      ["shop", "origins", "--brand", "01M86TDT9CSKW28VQJZ3VT7SDR", "--add", a],
      env,
    );
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no brand 01M86TDT9CSKW28VQJZ3VT7SDR/);
    const noShop = await runCli(["shop", "origins", "--brand", String(bare.id)], env);
    assert.equal(noShop.code, 1);
    assert.match(noShop.stderr, /no storefront integration/);
    for (const args of [["--add", a], ["--brand", String(shop.id), "--add", `${a},,${b}`]]) {
      const usage = await runCli(["shop", "origins", ...args], env);
      assert.equal(usage.code, 2, usage.stderr);
    }
  });
});

Deno.test("cli: shop origins from another process reaches the running service's door at its next request", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(["brand", "create", "--name", "A", "--shop", "acme.myshopify.com"], env),
    );
    const origin = "https://shop.acme.example";
    const fixture = JSON.parse(
      await Deno.readTextFile(
        new URL("../../fixtures/shopify/pixel_events.json", import.meta.url),
      ),
    ) as { samples: { event: unknown }[] };
    await withService(env, async (url) => {
      const post = async () => {
        const res = await fetch(`${url}/cdp/ingest/shopify?shop=acme.myshopify.com`, {
          method: "POST",
          headers: { "Content-Type": "text/plain", Origin: origin },
          body: JSON.stringify({ events: [fixture.samples[0]!.event] }),
        });
        await res.body?.cancel();
        return res.status;
      };
      // The service caches the shop (for 30 s) on this first request.
      assert.equal(await post(), 403);
      const args = ["shop", "origins", "--brand", String(brand.id)];
      json(await runCli([...args, "--add", origin], env));
      assert.equal(await post(), 202);
      json(await runCli([...args, "--remove", origin], env));
      assert.equal(await post(), 403);
    });
  });
});
