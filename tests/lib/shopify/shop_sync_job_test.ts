import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { DomainError } from "../../../lib/errors.ts";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import { startForwarder } from "../../../lib/ingest/forwarder.ts";
import { createShopifyAdmin } from "../../../lib/shopify/admin_client.ts";
import { readShopSyncState, type ShopSyncDeps } from "../../../lib/shopify/shop_sync.ts";
import {
  createShopSyncJob,
  enqueueShopSync,
  isShopSyncMessage,
} from "../../../lib/shopify/shop_sync_job.ts";
import { createBrand } from "../../../lib/tenancy/brands.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { DATABASE_URL, eventually, freshDatabase, kvQueue, testClock } from "../../test_support.ts";
import { bulkLineItem, bulkOrder, jsonl, startFakeBulkApi } from "./fake_bulk_api.ts";

const SHOP = "queued.myshopify.com";
const TOKEN = "shpat_queued";
const newId = monotonicFactory();

Deno.test("shop_sync job: enqueued, run by the forwarder through the real KV queue, never twice", async () => {
  const db = await freshDatabase();
  const dir = await Deno.makeTempDir();
  const kv = await Deno.openKv(`${dir}/kv.sqlite3`);
  const fake = startFakeBulkApi(TOKEN);
  const clock = testClock();
  try {
    const cipher = await openTokenCipher(kv, undefined);
    const brand = await createBrand(
      { sql: db.sql, newId, now: clock.now, cipher },
      { name: "Queued", shop: SHOP, accessToken: TOKEN },
    );
    fake.files.orders = () => jsonl(bulkOrder(1)) + jsonl(bulkLineItem(1, 0)) + jsonl(bulkOrder(2));
    const deps: ShopSyncDeps = {
      sql: db.sql,
      kv,
      client: createShopifyAdmin({ adminOrigin: fake.origin, apiVersion: fake.apiVersion }),
      cipher,
      now: clock.now,
      newId,
      copy: DATABASE_URL !== undefined,
      poll: { sleep: () => Promise.resolve() },
    };
    const job = createShopSyncJob(deps);
    const queue = kvQueue(kv);
    const request = {
      runId: newId(),
      brandId: brand.id,
      since: "2025-01-01",
      only: "orders" as const,
    };
    const queued = await enqueueShopSync(queue, request, clock.now());
    assert.equal(queued.status, "queued");
    // A second request while the first waits is refused.
    await assert.rejects(
      () => enqueueShopSync(queue, { ...request, runId: newId() }, clock.now()),
      (err: unknown) => err instanceof DomainError && err.kind === "conflict",
    );
    const forwarder = startForwarder({
      queue,
      engine: createEmbeddedEngine({ sql: db.sql, now: clock.now }),
      now: clock.now,
      jobs: { shop_sync: job },
    });
    await eventually(async () => (await readShopSyncState(kv, brand.id))?.status === "completed");
    const state = (await readShopSyncState(kv, brand.id))!;
    assert.equal(state.runId, request.runId);
    assert.equal(state.since, "2025-01-01");
    assert.deepEqual(state.counts, { orders: 2, customers: 0, lineItems: 1, rejected: 0 });
    assert.match(fake.requests[0]!.query!, /created_at:>=2025-01-01/);
    const [count] = await db
      .sql`select count(*)::int as n from orders where brand_id = ${brand.id}`;
    assert.equal(count!.n, 2);

    // At-least-once: the same message delivered again runs nothing.
    const requests = fake.requests.length;
    await job({ kind: "shop_sync", ...request });
    assert.equal(fake.requests.length, requests);
    // A job refused by Shopify is recorded and done (not thrown, so not retried).
    fake.userErrors.push("Bulk queries are not allowed for this shop.");
    const refused = await enqueueShopSync(queue, { ...request, runId: newId() }, clock.now());
    await eventually(async () => (await readShopSyncState(kv, brand.id))?.status === "failed");
    const failed = (await readShopSyncState(kv, brand.id))!;
    assert.deepEqual([failed.runId, failed.status], [refused.runId, "failed"]);
    assert.match(failed.lastError!, /not allowed/);

    kv.close();
    await forwarder;
    assert.deepEqual(fake.violations, []);
  } finally {
    try {
      kv.close();
    } catch { /* closed above to stop the forwarder */ }
    await fake.close();
    await db.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("isShopSyncMessage: only well-formed jobs", () => {
  const good = { kind: "shop_sync", runId: "r", brandId: "b", since: null, only: null };
  assert.equal(isShopSyncMessage(good), true);
  assert.equal(isShopSyncMessage({ ...good, only: "products" }), false);
  assert.equal(isShopSyncMessage({ ...good, kind: "events" }), false);
  assert.equal(isShopSyncMessage(null), false);
});
