/** `shop sync` and `shop status`, run as a subprocess exactly as `deno task admin` runs them. */
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

const ROOT = new URL("../../../", import.meta.url).pathname;
const SHOP = "cli-history.myshopify.com";
const TOKEN = "shpat_cli";

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", `${ROOT}admin.ts`, ...args],
    env,
    cwd: ROOT,
  }).output();
  return {
    code: output.code,
    stdout: new TextDecoder().decode(output.stdout),
    stderr: new TextDecoder().decode(output.stderr),
  };
}

/** One JSON object on stdout, nothing else. */
function json(result: CliResult): Record<string, unknown> {
  assert.equal(result.code, 0, result.stderr);
  const lines = result.stdout.trim().split("\n");
  assert.equal(lines.length, 1, result.stdout);
  return JSON.parse(lines[0]!);
}

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
