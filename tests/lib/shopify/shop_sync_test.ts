import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { DomainError } from "../../../lib/errors.ts";
import { createShopifyAdmin } from "../../../lib/shopify/admin_client.ts";
import {
  readShopSyncState,
  runShopSync,
  type ShopSyncDeps,
  type ShopSyncRequest,
} from "../../../lib/shopify/shop_sync.ts";
import { applyWebhook } from "../../../lib/shopify/webhooks.ts";
import { lazyIdentifierHasher } from "../../../lib/privacy/identifiers.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { createBrand } from "../../../lib/tenancy/brands.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { DATABASE_URL, freshDatabase, testClock } from "../../test_support.ts";
import {
  bulkCustomer,
  bulkLineItem,
  bulkOrder,
  type FakeBulkApi,
  generatedCustomers,
  jsonl,
  startFakeBulkApi,
} from "./fake_bulk_api.ts";
import { shopifyOrder } from "./shopify_payloads.ts";

const SHOP = "history.myshopify.com";
const TOKEN = "shpat_history";
const newId = monotonicFactory();

interface World {
  deps: ShopSyncDeps;
  fake: FakeBulkApi;
  sql: Sql;
  brandId: string;
  clock: ReturnType<typeof testClock>;
  request(extra?: Partial<ShopSyncRequest>): ShopSyncRequest;
}

async function withWorld(fn: (world: World) => Promise<void>) {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  const fake = startFakeBulkApi(TOKEN);
  const clock = testClock("2026-11-24T12:00:00.000Z");
  try {
    const cipher = await openTokenCipher(kv, undefined);
    const brand = await createBrand(
      { sql: db.sql, newId, now: clock.now, cipher },
      { name: "History", shop: SHOP, accessToken: TOKEN, beta: true },
    );
    const deps: ShopSyncDeps = {
      sql: db.sql,
      kv,
      client: createShopifyAdmin({ adminOrigin: fake.origin, apiVersion: fake.apiVersion }),
      cipher,
      now: clock.now,
      newId,
      copy: DATABASE_URL !== undefined,
      poll: { sleep: () => Promise.resolve() },
      // Several partitions even for a few orders.
      objectsPerPartition: 2,
    };
    await fn({
      deps,
      fake,
      sql: db.sql,
      brandId: brand.id,
      clock,
      request: (extra = {}) => ({
        runId: newId(),
        brandId: brand.id,
        since: null,
        only: null,
        ...extra,
      }),
    });
    assert.deepEqual(fake.violations, []);
  } finally {
    await fake.close();
    kv.close();
    await db.close();
  }
}

/** Orders 1..4 (customers 500001..500004), children before and after their orders. */
function ordersFile(): string {
  return [
    jsonl(bulkLineItem(1, 0)),
    jsonl(bulkOrder(1)),
    jsonl(bulkOrder(2)),
    jsonl(bulkLineItem(2, 0)),
    jsonl(bulkOrder(3, { displayFinancialStatus: "PENDING" })),
    jsonl(bulkLineItem(1, 1)),
    jsonl(bulkOrder(4, { cancelledAt: "2025-03-05T00:00:00Z" })),
    jsonl(bulkLineItem(3, 0)),
    jsonl(bulkLineItem(2, 1)),
    jsonl(bulkOrder(5, { totalPriceSet: { shopMoney: { amount: "12.345.6" } } })),
  ].join("");
}

async function storedOrders(sql: Sql, brandId: string) {
  return await sql<
    {
      external_id: string;
      state: string;
      total: string;
      updated_at: Date;
      synced_at: Date;
      line_items: { title: string; price: string }[];
      shopify_customer_id: string | null;
    }[]
  >`
    select o.external_id, o.state, o.total::text as total, o.updated_at, o.synced_at, o.line_items,
           c.shopify_customer_id
    from orders o left join contacts c on c.id = o.contact_id
    where o.brand_id = ${brandId} order by o.external_id`;
}

Deno.test("shop sync: customers then orders, in Shopify's sequence, through the import's writes", async () => {
  await withWorld(async ({ deps, fake, sql, brandId, request }) => {
    fake.files.customers = () => generatedCustomers(3);
    fake.files.orders = ordersFile;
    const progress: string[] = [];
    const result = await runShopSync(
      { ...deps, onProgress: (p) => progress.push(`${p.phase}:${p.step}`) },
      request(),
    );
    assert.deepEqual(
      fake.requests.map((r) => r.operation),
      ["run", "current", "current", "current", "download"].concat(
        ["run", "current", "current", "current", "download"],
      ),
    );
    assert.match(fake.requests[0]!.query!, /^\{\s*customers \{/);
    assert.match(fake.requests[5]!.query!, /^\{\s*orders \{/);
    assert.equal(result.bulkOperationId, "gid://shopify/BulkOperation/4100001");
    assert.deepEqual(
      { ...result, rejected: result.rejected.map((r) => [r.file, r.line]) },
      {
        bulkOperationId: "gid://shopify/BulkOperation/4100001",
        orders: 4,
        customers: 3,
        lineItems: 5,
        rejected: [["orders", 10]],
      },
    );
    assert.match(result.rejected[0]!.errors.join(), /total/);
    assert.ok(progress.includes("orders:applied") && progress.includes("customers:bulk"));

    const orders = await storedOrders(sql, brandId);
    assert.deepEqual(
      orders.map((
        o,
      ) => [o.external_id, o.state, o.total, o.line_items.length, o.shopify_customer_id]),
      [
        ["1", "complete", "60.10", 2, "500001"],
        ["2", "complete", "60.10", 2, "500002"],
        ["3", "pending", "60.10", 1, "500003"],
        ["4", "cancelled", "60.10", 0, "500004"],
      ],
    );
    assert.deepEqual(orders[0]!.line_items.map((i) => i.price), ["30.05", "29.99"]);
    const contacts = await sql<
      { shopify_customer_id: string; email: string; source: Date | null }[]
    >`
      select shopify_customer_id, email, source_updated_at as source from contacts
      where brand_id = ${brandId} order by shopify_customer_id`;
    assert.equal(contacts.length, 5);
    assert.deepEqual(contacts[0], {
      shopify_customer_id: "500000",
      email: "c500000@example.com",
      source: new Date("2025-01-01T00:00:00Z"),
    });

    const state = await readShopSyncState(deps.kv, brandId);
    assert.equal(state?.status, "completed");
    assert.equal(state?.bulkOperationId, "gid://shopify/BulkOperation/4100001");
    assert.deepEqual(state?.counts, { orders: 4, customers: 3, lineItems: 5, rejected: 1 });
    assert.deepEqual(state?.operations.customers, {
      id: "gid://shopify/BulkOperation/4100000",
      status: "COMPLETED",
      errorCode: null,
      objectCount: 3000,
      applied: true,
    });
    assert.equal(state?.lastError, null);
    assert.ok(state?.startedAt && state.finishedAt);
  });
});

Deno.test("shop sync: a re-run writes nothing new", async () => {
  await withWorld(async ({ deps, fake, sql, brandId, clock, request }) => {
    fake.files.customers = () => generatedCustomers(3);
    fake.files.orders = ordersFile;
    await runShopSync(deps, request());
    const before = await storedOrders(sql, brandId);
    const generation = async () =>
      (await sql`select coalesce(sum(generation), 0)::int as g from insight_generations
                 where brand_id = ${brandId}`)[0]!.g;
    const contactsUpdated = async () =>
      (await sql`select max(updated_at) as at from contacts where brand_id = ${brandId}`)[0]!.at;
    const [gen, updated] = [await generation(), await contactsUpdated()];
    clock.advance(3_600_000);
    const again = await runShopSync(deps, request());
    assert.equal(again.orders, 4);
    assert.deepEqual(await storedOrders(sql, brandId), before, "not even synced_at moved");
    assert.equal(await generation(), gen);
    assert.deepEqual(await contactsUpdated(), updated);
  });
});

Deno.test("shop sync: a FAILED operation exits with its errorCode, recorded in the state", async () => {
  await withWorld(async ({ deps, fake, sql, brandId, request }) => {
    fake.outcomes.push({ status: "FAILED", errorCode: "ACCESS_DENIED" });
    await assert.rejects(
      () => runShopSync(deps, request({ only: "orders" })),
      (err: unknown) =>
        err instanceof DomainError &&
        err.message ===
          "bulk operation gid://shopify/BulkOperation/4100000 ended FAILED (ACCESS_DENIED)",
    );
    assert.equal(fake.requests.filter((r) => r.operation === "download").length, 0);
    const state = await readShopSyncState(deps.kv, brandId);
    assert.equal(state?.status, "failed");
    assert.match(state!.lastError!, /FAILED \(ACCESS_DENIED\)/);
    assert.deepEqual(
      [state?.operations.orders?.status, state?.operations.orders?.errorCode],
      ["FAILED", "ACCESS_DENIED"],
    );
    assert.equal((await storedOrders(sql, brandId)).length, 0);
  });
});

Deno.test("shop sync: a download that stalls fails with its reason; the run again completes", async () => {
  await withWorld(async ({ deps, fake, sql, brandId, request }) => {
    // A real connection that sends part of the file, then nothing, and never ends.
    let cancelled = false;
    const half = new TextEncoder().encode(ordersFile().split("\n").slice(0, 3).join("\n"));
    fake.files.orders = () =>
      new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(half);
        },
        cancel() {
          cancelled = true;
        },
      });
    const run = request({ only: "orders" });
    await assert.rejects(
      () => runShopSync({ ...deps, downloadIdleMs: 300 }, run),
      (err: unknown) =>
        err instanceof DomainError && err.kind === "unavailable" &&
        err.message === "the bulk operation's file stalled: no bytes for 0.3 s",
    );
    const state = await readShopSyncState(deps.kv, brandId);
    assert.equal(state?.status, "failed");
    assert.match(state!.lastError!, /stalled/);
    assert.equal((await storedOrders(sql, brandId)).length, 0);
    for (let i = 0; i < 50 && !cancelled; i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(cancelled, "the stalled connection is closed");
    // The same run again, the file whole this time: it attaches to its operation and applies it.
    fake.files.orders = ordersFile;
    const again = await runShopSync(deps, run);
    assert.equal(again.orders, 4);
    assert.equal((await storedOrders(sql, brandId)).length, 4);
  });
});

Deno.test("shop sync: a userError is reported, not retried", async () => {
  await withWorld(async ({ deps, fake, brandId, request }) => {
    fake.userErrors.push("Bulk queries are not allowed for this shop.");
    await assert.rejects(
      () => runShopSync(deps, request({ only: "customers" })),
      (err: unknown) =>
        err instanceof DomainError && err.kind === "conflict" &&
        err.message ===
          "Shopify refused the bulk query: Bulk queries are not allowed for this shop.",
    );
    assert.equal(fake.requests.length, 1);
    const state = await readShopSyncState(deps.kv, brandId);
    assert.equal(state?.status, "failed");
    assert.match(state!.lastError!, /not allowed/);
  });
});

Deno.test("shop sync: a webhook racing the backfill keeps the newer state, whichever lands first", async () => {
  await withWorld(async ({ deps, fake, sql, brandId, request }) => {
    fake.files.orders = ordersFile;
    const privacy = { hasher: lazyIdentifierHasher(deps.kv, undefined) };
    const webhook = (id: number, updatedAt: string, total: string) =>
      applyWebhook({ sql, kv: deps.kv, now: deps.now, newId, privacy }, {
        topic: "orders/updated",
        shop: SHOP,
        webhookId: `wh-${id}-${updatedAt}`,
        payload: shopifyOrder({
          id,
          admin_graphql_api_id: `gid://shopify/Order/${id}`,
          name: `#${id}`,
          updated_at: updatedAt,
          total_price: total,
        }),
      });
    // Before the backfill: order 1 is newer at Shopify's webhook than in the file.
    assert.equal((await webhook(1, "2025-04-01T00:00:00Z", "111.00")).outcome, "applied");
    // While the operation runs (before its file is applied): order 2, newer again.
    fake.onPoll = async (_id, status) => {
      if (status === "COMPLETED") {
        assert.equal((await webhook(2, "2025-04-02T00:00:00Z", "222.00")).outcome, "applied");
      }
    };
    await runShopSync(deps, request({ only: "orders" }));
    // After it: an older webhook of order 3 is stale; a newer one of order 4 applies.
    assert.equal((await webhook(3, "2025-03-01T00:00:00Z", "333.00")).outcome, "stale");
    assert.equal((await webhook(4, "2025-05-01T00:00:00Z", "444.00")).outcome, "applied");
    const totals = (await storedOrders(sql, brandId)).map((o) => [o.external_id, o.total]);
    assert.deepEqual(totals, [["1", "111.00"], ["2", "222.00"], ["3", "60.10"], ["4", "444.00"]]);
  });
});

Deno.test("shop sync: a stale customer is skipped, a newer one applied", async () => {
  await withWorld(async ({ deps, fake, sql, brandId, request }) => {
    fake.files.customers = () =>
      jsonl(bulkCustomer(1, { firstName: "Old", updatedAt: "2025-01-01T00:00:00Z" })) +
      jsonl(bulkCustomer(2, { firstName: "New", updatedAt: "2025-09-01T00:00:00Z" }));
    await sql`insert into contacts (id, brand_id, shopify_customer_id, first_name, created_at,
                                    updated_at, source_updated_at)
              values ('c1', ${brandId}, '1', 'Webhook', now(), now(), '2025-06-01T00:00:00Z'),
                     ('c2', ${brandId}, '2', 'Webhook', now(), now(), '2025-06-01T00:00:00Z')`;
    const result = await runShopSync(deps, request({ only: "customers" }));
    assert.equal(result.customers, 2);
    const names = await sql`select shopify_customer_id, first_name from contacts
                            where brand_id = ${brandId} order by 1`;
    assert.deepEqual(names.map((r) => [r.shopify_customer_id, r.first_name]), [
      ["1", "Webhook"],
      ["2", "New"],
    ]);
  });
});

Deno.test("shop sync: the same run resumed attaches to its running operation", async () => {
  await withWorld(async ({ deps, fake, sql, brandId, request }) => {
    fake.files.customers = () => generatedCustomers(2);
    fake.files.orders = ordersFile;
    let crash = true;
    fake.onPoll = (id) => {
      if (crash && id.endsWith("4100001")) {
        crash = false;
        throw new Error("the process died");
      }
    };
    const run = request();
    await assert.rejects(() => runShopSync(deps, run));
    assert.equal((await readShopSyncState(deps.kv, brandId))?.status, "failed");
    const runs = () => fake.requests.filter((r) => r.operation === "run").length;
    assert.equal(runs(), 2);
    const result = await runShopSync(deps, run);
    assert.equal(runs(), 2, "no new operation: the customers were applied, the orders attached");
    assert.equal(result.bulkOperationId, "gid://shopify/BulkOperation/4100001");
    assert.deepEqual([result.customers, result.orders], [2, 4]);
    assert.equal((await storedOrders(sql, brandId)).length, 4);
  });
});

Deno.test("shop sync: a brand without a connected shop or token is refused", async () => {
  await withWorld(async ({ deps, sql, brandId, request }) => {
    await sql`update integrations set access_token_ciphertext = null where brand_id = ${brandId}`;
    await assert.rejects(
      () => runShopSync(deps, request()),
      (err: unknown) => err instanceof DomainError && err.kind === "forbidden",
    );
    await sql`update integrations set status = 'disconnected' where brand_id = ${brandId}`;
    await assert.rejects(
      () => runShopSync(deps, request()),
      (err: unknown) => err instanceof DomainError && /disconnected/.test(err.message),
    );
  });
});
