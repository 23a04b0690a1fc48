// POST /cdp/ingest/shopify and verified stitching, through the app, the ingest queue (both
// implementations), the forwarder with its pixel_stitch job, and HMAC-signed order webhooks.
import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { createIngestQueue } from "../../lib/runtime/runtime.ts";
import { loadConfig } from "../../lib/config.ts";
import { PIXEL_NOT_ANONYMOUS } from "../../lib/engine/apply_events.ts";
import { setBrand } from "../../lib/tenancy/brands.ts";
import { listDeadLetters } from "../../lib/ingest/queue.ts";
import { eventually, type TestContext, withContext } from "../test_support.ts";
import {
  type Brand,
  ENV,
  forwarder,
  orderWebhook,
  send,
  visit,
  VISITOR,
} from "./shopify_pixel_support.ts";

async function scalar(ctx: TestContext, query: string, ...params: unknown[]): Promise<unknown> {
  const [row] = await ctx.sql.unsafe(query, params as never[]);
  return row ? Object.values(row)[0] : undefined;
}

const claimStatus = (ctx: TestContext) =>
  scalar(ctx, "select status from pixel_claims where client_id = $1", VISITOR);

async function customer(ctx: TestContext, brand: Brand, identifier: string) {
  const res = await ctx.request(`/cdp/customers/${encodeURIComponent(identifier)}`, brand.key);
  return { status: res.status, body: await res.json() };
}

/** The visitor is the customer's: one merged profile with the visits and the events. */
async function assertStitched(ctx: TestContext, brand: Brand) {
  await eventually(async () => (await claimStatus(ctx)) === "merged");
  const { status, body } = await customer(ctx, brand, "bob.norman@example.com");
  assert.equal(status, 200);
  assert.equal(body.profile.id, "store_207119551");
  assert.equal(body.profile.provenance, "merged");
  assert.equal(body.profile.identity.email, "bob.norman@example.com");
  assert.ok(body.profile.behavior.nb_of_visits >= 1);
  assert.equal(body.profile.behavior.first_visit, "2026-11-21T11:50:00.000Z");
  assert.equal(body.profile.behavior.last_visit, "2026-11-21T11:58:00.000Z");
  assert.equal(body.commerce.order_count, 1);
  // The same record by the Shopify customer id, and the visitor's id resolves to it.
  assert.equal((await customer(ctx, brand, "207119551")).body.profile.id, "store_207119551");
  const events = await (await ctx.request(
    `/cdp/profiles/store_207119551/events?limit=100`,
    brand.key,
  )).json();
  const types = events.list.map((e: { eventType: string }) => e.eventType);
  assert.equal(types.length, 13);
  assert.ok(types.includes("checkout_completed") && types.includes("page_viewed"));
  const visitor = await (await ctx.request(`/cdp/profiles/${VISITOR}`, brand.key)).json();
  assert.equal(visitor.profile.itemId, "store_207119551");
}

Deno.test("shopify pixel: the documented events are stored on clientId; a re-sent batch once", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const running = forwarder(ctx);
    const events = visit();
    for (let i = 0; i < 2; i++) {
      const res = await send(ctx, brand.scope!, events);
      assert.equal(res.status, 202);
      assert.equal(res.headers.get("access-control-allow-origin"), `https://${brand.scope}`);
      assert.deepEqual(await res.json(), { accepted: 13, rejected: [], scope: brand.scope });
    }
    await eventually(async () =>
      (await scalar(ctx, "select count(*)::int from events where profile_id = $1", VISITOR)) ===
        13
    );
    // Both deliveries applied (nothing left in the queue) and still 13 events: stored once.
    await eventually(async () => (await ctx.queue.backlog()) === 0);
    assert.equal(await scalar(ctx, "select count(*)::int from events"), 13);
    const profile = await (await ctx.request(`/cdp/profiles/${VISITOR}`, brand.key)).json();
    assert.equal(profile.profile.provenance, "pixel");
    const [page] = await ctx.sql`
      select id, source, time_stamp, properties from events where event_type = 'page_viewed'`;
    assert.equal(page!.source, "pixel");
    assert.equal(page!.id, events[0]!.id);
    assert.equal(page!.properties.context.page.referrer, "https://www.google.com/");
    assert.equal(page!.properties.context.locale, "en-US");
    const [product] = await ctx.sql`
      select properties from events where event_type = 'product_viewed'`;
    assert.equal(product!.properties.productId, "7808926384363");
    assert.equal(product!.properties.price, 50);
    ctx.kv.close();
    await running;
  });
});

Deno.test("shopify pixel: the proxy's rules: Origin, unknown shops answered alike, bounds, per-event refusals", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const shop = brand.scope!;
    // Another origin: 403, nothing accepted.
    const foreign = await send(ctx, shop, visit(), { Origin: "https://evil.example" });
    assert.equal(foreign.status, 403);
    // An unknown shop gets a connected shop's answer; its events are dropped.
    const unknown = await send(ctx, "nobody.myshopify.com", visit());
    assert.equal(unknown.status, 202);
    assert.deepEqual(await unknown.json(), {
      accepted: 13,
      rejected: [],
      scope: "nobody.myshopify.com",
    });
    assert.equal(await ctx.queue.backlog(), 0);
    // More than 20 events, or no events array: 400 envelopes.
    const many = await send(ctx, shop, [...visit(), ...visit("other")]);
    assert.equal(many.status, 400);
    const bad = await ctx.app.request(`/cdp/ingest/shopify?shop=${shop}`, {
      method: "POST",
      headers: { Origin: `https://${shop}` },
      body: "{not json",
    });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error, "bad_request");
    // Over 64 KB: 413.
    const big = await send(ctx, shop, [{ ...visit()[0]!, data: { pad: "x".repeat(70_000) } }]);
    assert.equal(big.status, 413);
    // Unknown and malformed events are refused one by one; the others go.
    const mixed = await send(ctx, shop, [
      visit()[0],
      { ...visit()[0], id: "x1", name: "alert_displayed" },
      { ...visit()[0], id: "x2", clientId: "store_1" },
      { ...visit()[2], id: "x4", data: { productVariant: { price: { amount: "NaN" } } } },
    ]);
    assert.equal(mixed.status, 202);
    const answer = await mixed.json();
    assert.equal(answer.accepted, 2);
    assert.deepEqual(answer.rejected.map((r: { index: number }) => r.index), [1, 2]);
    assert.equal(answer.rejected[0].errors[0].path, "$.events[1].name");
    assert.equal(answer.rejected[1].errors[0].path, "$.events[2].clientId");
  });
});

Deno.test("shopify pixel: an event naming an identified profile writes nothing; it is dead-lettered with its reason", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const shop = brand.scope!;
    // A server profile, a merged one, and an id a merge absorbed.
    await ctx.sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      values (${shop}, 'known', '{"nbOfVisits": 1}'::jsonb, 'server', now(), now()),
             (${shop}, 'merged', '{}'::jsonb, 'merged', now(), now())`;
    await ctx.sql`insert into profile_aliases (scope, alias_id, profile_id, merged_at)
                  values (${shop}, 'absorbed', 'merged', now())`;
    const profiles = async () => [
      ...await ctx.sql`select item_id, properties, provenance from profiles order by item_id`,
    ];
    const before = await profiles();
    const running = forwarder(ctx);
    const res = await send(ctx, shop, [
      { ...visit()[0], id: "y1", clientId: "known" },
      { ...visit()[0], id: "y2", clientId: "merged" },
      { ...visit()[0], id: "y3", clientId: "absorbed" },
      { ...visit()[0], id: "y4", clientId: "anon_ok" },
    ]);
    // The door answers as for any event (the pixel never reads it)...
    assert.deepEqual(await res.json(), { accepted: 4, rejected: [], scope: shop });
    // ...and where the events are applied only the anonymous visitor's is stored.
    await eventually(async () => (await listDeadLetters(ctx.kv, brand.brandId)).length === 1);
    await eventually(async () => (await ctx.queue.backlog()) === 0);
    const [letter] = await listDeadLetters(ctx.kv, brand.brandId);
    assert.deepEqual(letter!.message.batch.events.map((e) => e.profileId), [
      "known",
      "merged",
      "absorbed",
    ]);
    for (const id of ["y1", "y2", "y3"]) {
      assert.ok(letter!.reason.includes(`${id}: 403 ${PIXEL_NOT_ANONYMOUS}`), letter!.reason);
    }
    assert.deepEqual(
      (await ctx.sql`select id, profile_id from events`).map((r) => [r.id, r.profile_id]),
      [["y4", "anon_ok"]],
    );
    const after = await profiles();
    assert.deepEqual(after.filter((p) => p.item_id !== "anon_ok"), before);
    assert.equal(after.find((p) => p.item_id === "anon_ok")?.provenance, "pixel");
    ctx.kv.close();
    await running;
  });
});

Deno.test("shopify pixel: shops are cached (unknown ones too); the writers' changes apply at once, SQL by hand within 30 s", async () => {
  await withContext(async (ctx) => {
    const shop = `later-${Deno.pid}.myshopify.com`;
    // The backlog counts events: `batches` of the visit's 13 queued in all.
    const queued = async (batches: number) => {
      const res = await send(ctx, shop, visit());
      assert.equal(res.status, 202);
      assert.equal((await res.json()).accepted, 13);
      assert.equal(await ctx.queue.backlog(), 13 * batches);
    };
    // Unknown (and cached as unknown): answered, its events dropped.
    await queued(0);
    await queued(0);
    // Connected through the writers (as `brand create --shop`): the next request is the shop's.
    const brand = await ctx.seedBrand({ shop });
    await queued(1);
    // Disconnected through them: dropped from the next request on.
    await setBrand(ctx.deps, { brandId: brand.brandId, integration: "disconnected" });
    await queued(1);
    await setBrand(ctx.deps, { brandId: brand.brandId, integration: "connected" });
    await queued(2);
    // Behind the writers' back (SQL by hand) the cached shop holds until its 30 s are up.
    await ctx.sql`update integrations set status = 'disconnected' where shop_domain = ${shop}`;
    await queued(3);
    ctx.clock.advance(30_000);
    await queued(3);
  });
});

Deno.test("shopify pixel: a storefront origin added by `shop origins` is accepted at once, removed refused at once", async () => {
  const token = "test-admin-token-0123456789abcdefghijkl";
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const shop = brand.scope!;
    const origin = "https://shop.acme.example";
    // The operator command, run by the service (the operator API) on the app's own stores.
    const origins = async (...args: string[]) => {
      const res = await ctx.app.request("/admin/commands/shop-origins", {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify({ args: ["--brand", brand.brandId, ...args] }),
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      return body;
    };
    const fromOrigin = () => send(ctx, shop, visit().slice(0, 1), { Origin: origin });
    // Refused, and the shop (with its origins) now cached by the door.
    assert.equal((await fromOrigin()).status, 403);
    assert.deepEqual((await origins("--add", origin)).added, [origin]);
    // No clock advance: the bumped version invalidates the cached shop.
    const accepted = await fromOrigin();
    assert.equal(accepted.status, 202);
    assert.equal(accepted.headers.get("Access-Control-Allow-Origin"), origin);
    assert.equal(await ctx.queue.backlog(), 1);
    assert.deepEqual((await origins("--remove", origin)).removed, [origin]);
    assert.equal((await fromOrigin()).status, 403);
    assert.equal((await send(ctx, shop, visit().slice(0, 1))).status, 202);
  }, { ...ENV, ADMIN_TOKEN: token });
});

Deno.test("stitching: a claim before its order's signed webhook merges once the order arrives", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const running = forwarder(ctx);
    assert.equal((await send(ctx, brand.scope!, visit())).status, 202);
    await eventually(async () => (await claimStatus(ctx)) === "pending");
    await eventually(async () =>
      (await scalar(ctx, "select count(*)::int from events where profile_id = $1", VISITOR)) ===
        13
    );
    // No order yet: the visitor stays anonymous.
    assert.equal(
      await scalar(ctx, "select provenance from profiles where item_id = $1", VISITOR),
      "pixel",
    );
    assert.equal((await customer(ctx, brand, "bob.norman@example.com")).status, 404);
    await orderWebhook(ctx, brand.scope!);
    await assertStitched(ctx, brand);
    // Shopify's retry of the same order and a re-sent claim change nothing.
    await orderWebhook(ctx, brand.scope!);
    assert.equal((await send(ctx, brand.scope!, visit())).status, 202);
    await eventually(async () => (await ctx.queue.backlog()) === 0);
    assert.equal(await scalar(ctx, "select count(*)::int from profile_aliases"), 1);
    assert.equal(await scalar(ctx, "select count(*)::int from events"), 13);
    ctx.kv.close();
    await running;
  }, ENV);
});

for (const kind of ["kv", "outbox"] as const) {
  Deno.test(`stitching (${kind} queue): the order's signed webhook first, then the claim`, async () => {
    const kv = await Deno.openKv(":memory:");
    const config = loadConfig({ DATA_DIR: "/nonexistent", ...ENV });
    const queue = createIngestQueue(kv, { ...config, ingestQueue: kind }, monotonicFactory());
    try {
      await withContext(
        async (ctx) => {
          const brand = await ctx.seedBrand();
          const running = forwarder(ctx);
          await orderWebhook(ctx, brand.scope!);
          // No claim waited for it: no job was sent.
          assert.equal(await ctx.queue.backlog(), 0);
          assert.equal((await send(ctx, brand.scope!, visit())).status, 202);
          await assertStitched(ctx, brand);
          queue.stop();
          kv.close();
          await running;
        },
        ENV,
        { queue },
      );
    } finally {
      try {
        kv.close();
      } catch { /* closed by the test */ }
    }
  });
}

Deno.test("stitching: forged claims never merge (no such order; an order with another email)", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const running = forwarder(ctx);
    // A real order of Bob's, and two visitors who did not place it.
    await orderWebhook(ctx, brand.scope!);
    const forgedOrder = visit("forger_1", (e) => {
      const checkout = (e.data as { checkout?: { order: { id: string } | null } }).checkout;
      if (checkout?.order) checkout.order.id = "gid://shopify/OrderIdentity/999999";
    });
    const wrongEmail = visit("forger_2", (e) => {
      const checkout = (e.data as { checkout?: { email: string } }).checkout;
      if (checkout) checkout.email = "mallory@example.com";
    });
    assert.equal((await send(ctx, brand.scope!, forgedOrder)).status, 202);
    assert.equal((await send(ctx, brand.scope!, wrongEmail)).status, 202);
    await eventually(async () =>
      (await scalar(
        ctx,
        "select status from pixel_claims where client_id = 'forger_2'",
      )) === "refused"
    );
    await eventually(async () => (await ctx.queue.backlog()) === 0);
    assert.equal(
      await scalar(ctx, "select reason from pixel_claims where client_id = 'forger_2'"),
      "email_mismatch",
    );
    // The claim on an order that does not exist waits, and merges nothing.
    assert.equal(
      await scalar(ctx, "select status from pixel_claims where client_id = 'forger_1'"),
      "pending",
    );
    const rows = await ctx.sql`
      select item_id, provenance from profiles order by item_id`;
    assert.deepEqual(rows.map((r) => [r.item_id, r.provenance]), [
      ["forger_1", "pixel"],
      ["forger_2", "pixel"],
    ]);
    assert.equal(await scalar(ctx, "select count(*)::int from profile_aliases"), 0);
    ctx.kv.close();
    await running;
  }, ENV);
});
