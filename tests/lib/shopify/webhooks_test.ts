import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { DomainError } from "../../../lib/errors.ts";
import type { LogLevel } from "../../../lib/log.ts";
import { lazyIdentifierHasher } from "../../../lib/privacy/identifiers.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { createBrand } from "../../../lib/tenancy/brands.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import {
  applyWebhook,
  importWebhookKey,
  signShopifyWebhook,
  verifyShopifyHmac,
  type WebhookDelivery,
  type WebhookDeps,
} from "../../../lib/shopify/webhooks.ts";
import { freshDatabase, testClock } from "../../test_support.ts";
import { shopifyOrder } from "./shopify_payloads.ts";

const newId = monotonicFactory();
const SHOP = "hooks.myshopify.com";
const SECRET = "shpss_0123456789abcdef0123456789abcdef";

interface Logged {
  level: LogLevel;
  message: string;
  fields?: Record<string, unknown>;
}

async function withShop(
  fn: (deps: WebhookDeps & { logged: Logged[] }, brandId: string) => Promise<void>,
) {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  const clock = testClock();
  try {
    const brand = await createBrand(
      { sql: db.sql, newId, now: clock.now, cipher: await openTokenCipher(kv, undefined) },
      { name: "B", shop: SHOP, beta: true },
    );
    const logged: Logged[] = [];
    await fn({
      sql: db.sql,
      kv,
      now: clock.now,
      newId,
      log: (level, message, fields) => void logged.push({ level, message, fields }),
      privacy: { hasher: lazyIdentifierHasher(kv, undefined) },
      logged,
    }, brand.id);
  } finally {
    kv.close();
    await db.close();
  }
}

let _deliveries = 0;
const delivery = (topic: string, payload: Record<string, unknown>, webhookId?: string) =>
  ({
    topic,
    shop: SHOP,
    webhookId: webhookId ?? `wh-${++_deliveries}`,
    payload,
  }) satisfies WebhookDelivery;

const count = async (sql: Sql, table: string, brandId: string) =>
  (await sql.unsafe(`select count(*)::int as n from ${table} where brand_id = $1`, [brandId]))[0]!
    .n as number;

Deno.test("verifyShopifyHmac: exactly the signed bytes with the app secret; anything else is a mismatch", async () => {
  const key = await importWebhookKey(SECRET);
  const body = new TextEncoder().encode('{"id":1}');
  const signature = await signShopifyWebhook(key, body);
  assert.equal(await verifyShopifyHmac(key, body, signature), true);
  assert.equal(await verifyShopifyHmac(key, body, ` ${signature} `), true);
  assert.equal(
    await verifyShopifyHmac(key, new TextEncoder().encode('{"id":2}'), signature),
    false,
  );
  assert.equal(await verifyShopifyHmac(await importWebhookKey("other"), body, signature), false);
  for (const header of [undefined, "", "not base64!", "A".repeat(200), signature.slice(0, 10)]) {
    assert.equal(await verifyShopifyHmac(key, body, header), false, String(header));
  }
});

Deno.test("applyWebhook: an order topic upserts the order; the same webhook id again is a duplicate", async () => {
  await withShop(async (deps, brandId) => {
    const first = delivery("orders/create", shopifyOrder(), "same-id");
    assert.deepEqual(await applyWebhook(deps, first), { outcome: "applied" });
    assert.equal(await count(deps.sql, "orders", brandId), 1);
    assert.equal(await count(deps.sql, "contacts", brandId), 1);
    // A retry of the same delivery, even with another payload, is not applied again.
    const retry = delivery("orders/updated", shopifyOrder({ total_price: "1.00" }), "same-id");
    assert.deepEqual(await applyWebhook(deps, retry), { outcome: "duplicate" });
    const [row] = await deps
      .sql`select total::text as total from orders where brand_id = ${brandId}`;
    assert.equal(row!.total, "199.99");
    // Another delivery of the same order, older than the stored one, is stale.
    const older = shopifyOrder({ updated_at: "2025-01-01T00:00:00Z", total_price: "2.00" });
    assert.deepEqual(await applyWebhook(deps, delivery("orders/updated", older)), {
      outcome: "stale",
    });
  });
});

Deno.test("applyWebhook: unknown shops and topics are ignored; a disconnected shop syncs nothing", async () => {
  await withShop(async (deps, brandId) => {
    assert.deepEqual(
      await applyWebhook(deps, {
        ...delivery("orders/create", shopifyOrder()),
        shop: "x.myshopify.com",
      }),
      { outcome: "ignored", reason: "unknown_shop" },
    );
    assert.deepEqual(await applyWebhook(deps, delivery("products/create", { id: 1 })), {
      outcome: "ignored",
      reason: "unsupported_topic",
    });
    assert.deepEqual(await applyWebhook(deps, delivery("app/uninstalled", { id: 1 })), {
      outcome: "applied",
    });
    const [integration] = await deps.sql`
      select status from integrations where brand_id = ${brandId}`;
    assert.equal(integration!.status, "disconnected");
    assert.deepEqual(await applyWebhook(deps, delivery("orders/create", shopifyOrder())), {
      outcome: "ignored",
      reason: "integration_disconnected",
    });
    assert.equal(await count(deps.sql, "orders", brandId), 0);
  });
});

Deno.test("applyWebhook: a payload that does not map, or names another shop, is invalid input and records nothing", async () => {
  await withShop(async (deps, brandId) => {
    const refused = async (d: WebhookDelivery, message: RegExp) => {
      await assert.rejects(applyWebhook(deps, d), (err: unknown) => {
        assert.ok(err instanceof DomainError);
        assert.equal(err.kind, "invalid_input");
        assert.match(err.message, message);
        return true;
      });
    };
    await refused(delivery("orders/create", shopifyOrder({ currency: "usd" })), /currency/);
    await refused(
      delivery("customers/redact", { shop_domain: "other.myshopify.com", customer: { id: 1 } }),
      /another shop/,
    );
    await refused(delivery("customers/redact", { customer: null }), /customers\/redact/);
    const [row] = await deps.sql<{ n: number }[]>`
      select count(*)::int as n from webhook_deliveries where shop_domain = ${SHOP}`;
    assert.equal(row!.n, 0);
    assert.equal(await count(deps.sql, "orders", brandId), 0);
  });
});

Deno.test("applyWebhook: customers/data_request records an export request, logged through deps.log without personal data", async () => {
  await withShop(async (deps) => {
    const result = await applyWebhook(
      deps,
      delivery("customers/data_request", {
        shop_domain: SHOP,
        orders_requested: [1, 2],
        customer: { id: 191167, email: "john@example.com" },
        data_request: { id: 9999 },
      }, "dr-1"),
    );
    assert.equal(result.outcome, "applied");
    // An export request of the customer, for the merchant to download from the dashboard.
    const [request] = await deps.sql`
      select type, status, identifier, extra_identifiers, requested_by from privacy_requests
      where id = ${result.privacy_request_id!}`;
    assert.deepEqual(request, {
      type: "export",
      status: "pending",
      identifier: "191167",
      extra_identifiers: ["john@example.com"],
      requested_by: "shopify:customers/data_request",
    });
    assert.deepEqual(deps.logged, [{
      level: "info",
      message: "shopify customers/data_request",
      fields: {
        shop: SHOP,
        webhook_id: "dr-1",
        data_request_id: "9999",
        shopify_customer_id: "191167",
        orders_requested: 2,
      },
    }]);
  });
});

Deno.test("applyWebhook: a webhook id or body digest bound to another shop is invalid input; a refused or unmappable delivery binds nothing", async () => {
  await withShop(async (deps, brandId) => {
    const other = "hooks-2.myshopify.com";
    await createBrand(
      {
        sql: deps.sql,
        newId,
        now: deps.now,
        cipher: await openTokenCipher(deps.kv, undefined),
      },
      { name: "C", shop: other },
    );
    // Unmappable: refused before anything is bound, so the id stays free for its real shop.
    await assert.rejects(
      applyWebhook(deps, {
        ...delivery("orders/create", shopifyOrder({ currency: "usd" }), "w-1"),
        shop: other,
        bodyDigest: "d-1",
      }),
      /currency/,
    );
    const own = { ...delivery("orders/create", shopifyOrder(), "w-1"), bodyDigest: "d-1" };
    assert.deepEqual(await applyWebhook(deps, own), { outcome: "applied" });
    for (
      const [webhookId, bodyDigest, message] of [
        ["w-1", "d-2", /X-Shopify-Webhook-Id was delivered for another shop/],
        ["w-2", "d-1", /signed body was delivered for another shop/],
      ] as const
    ) {
      await assert.rejects(
        applyWebhook(deps, { ...own, shop: other, webhookId, bodyDigest }),
        (err: unknown) =>
          err instanceof DomainError && err.kind === "invalid_input" &&
          message.test(err.message),
      );
    }
    const [row] = await deps.sql<{ n: number }[]>`
      select count(*)::int as n from webhook_deliveries where shop_domain = ${other}`;
    assert.equal(row!.n, 0);
    assert.deepEqual(await applyWebhook(deps, own), { outcome: "duplicate" });
    assert.equal(await count(deps.sql, "orders", brandId), 1);
  });
});
