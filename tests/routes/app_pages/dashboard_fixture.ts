/**
 * Seeded data for the dashboard's tests and its browser check: a commerce brand with customers,
 * orders over several months, profiles, events over the last days and a segment; another brand
 * beside it; and the Shopify session tokens that open the dashboard.
 */
import { monotonicFactory } from "ulid";
import { OrderLineSchema } from "../../../lib/commerce/order_lines.ts";
import { upsertOrder } from "../../../lib/commerce/orders.ts";
import { signSessionToken } from "../../../lib/tenancy/session_token.ts";
import type { TestContext } from "../../test_support.ts";

/** The app credentials the dashboard tests configure. */
export const APP_ENV = { SHOPIFY_API_KEY: "app-client-id", SHOPIFY_API_SECRET: "app-secret" };

/** A seeded brand. */
export type SeededBrand = Awaited<ReturnType<TestContext["seedBrand"]>>;

const newId = monotonicFactory();
const _DAY = 86_400_000;

/** A Shopify session token for the shop, valid at the context's clock (`extra` overrides). */
export async function sessionToken(
  ctx: TestContext,
  shop: string,
  extra: Record<string, unknown> = {},
  secret = APP_ENV.SHOPIFY_API_SECRET,
): Promise<string> {
  const now = ctx.clock.now().getTime() / 1000;
  return await signSessionToken({
    iss: `https://${shop}/admin`,
    dest: `https://${shop}`,
    aud: APP_ENV.SHOPIFY_API_KEY,
    sub: "42",
    exp: now + 60,
    nbf: now - 1,
    iat: now - 1,
    ...extra,
  }, secret);
}

/** Opens the dashboard as the embedded app does; returns the page token the redirect carries. */
export async function openDashboard(ctx: TestContext, shop: string): Promise<string> {
  const token = await sessionToken(ctx, shop);
  const res = await ctx.app.request(`/app?shop=${shop}&id_token=${token}&host=x`);
  if (res.status !== 303) throw new Error(`GET /app answered ${res.status}`);
  const location = new URL(res.headers.get("location")!, "http://localhost");
  return location.searchParams.get("s")!;
}

/**
 * Seeds brand A (the dashboard's): 12 customers with 1 to 5 completed orders each between
 * January and November, a few cancelled and unattributed orders, profiles for the customers,
 * page views over the last ten days and a segment of profiles with an email; and brand B with
 * one customer of its own.
 */
export async function seedDashboard(ctx: TestContext) {
  const a = await ctx.seedBrand({ name: "Acme" });
  const b = await ctx.seedBrand({ name: "Other" });
  const now = ctx.clock.now().getTime();
  const lines: Record<string, unknown>[] = [];
  for (let c = 0; c < 12; c++) {
    const customer = { email: `c${c}@example.com`, shopify_customer_id: String(1000 + c) };
    const orders = 1 + (c % 5);
    for (let o = 0; o < orders; o++) {
      const created = new Date(now - (300 - c * 7 - o * (20 + c)) * _DAY).toISOString();
      const product = `P${(c + o) % 6}`;
      const quantity = 1 + ((c + o) % 3);
      const price = (25 + c * 17 + o * 3).toFixed(2);
      lines.push({
        external_id: `A-${c}-${o}`,
        number: `#${c}${o}`,
        state: o === 3 ? "cancelled" : "complete",
        billing_status: "complete",
        total: (Number(price) * quantity).toFixed(2),
        currency_code: "USD",
        created_at: created,
        customer,
        line_items: [{ title: `Product ${product}`, quantity, price, product_id: product }],
      });
    }
  }
  lines.push({
    external_id: "A-guest",
    number: "#guest",
    state: "complete",
    billing_status: "complete",
    total: "80.00",
    currency_code: "USD",
    created_at: new Date(now - 40 * _DAY).toISOString(),
    line_items: [{ title: "Product P1", quantity: 1, price: "80.00", product_id: "P1" }],
  });
  await _load(ctx, a, lines);
  await _load(ctx, b, [{
    external_id: "B-1",
    number: "#B1",
    state: "complete",
    billing_status: "complete",
    total: "9999.00",
    currency_code: "USD",
    created_at: new Date(now - 5 * _DAY).toISOString(),
    customer: { email: "secret@other.example" },
    line_items: [{ title: "Other product", quantity: 1, price: "9999.00", product_id: "X" }],
  }]);
  const events = [];
  for (let c = 0; c < 12; c++) {
    events.push({
      id: newId(),
      eventType: "updateProperties",
      profileId: `store_acme_${1000 + c}`,
      timeStamp: new Date(now - 12 * _DAY).toISOString(),
      properties: {
        update: {
          "properties.email": `c${c}@example.com`,
          "properties.shopifyCustomerId": String(1000 + c),
          "properties.firstName": `Customer${c}`,
        },
      },
    });
    for (let d = 0; d <= c % 10; d++) {
      events.push({
        id: newId(),
        eventType: d % 2 ? "product_viewed" : "page_viewed",
        profileId: `store_acme_${1000 + c}`,
        timeStamp: new Date(now - d * _DAY - c * 60_000).toISOString(),
        properties: { url: `https://${a.scope}/` },
      });
    }
  }
  await ctx.deps.engine.applyEvents({
    scope: a.scope!,
    source: "server",
    receivedAt: ctx.clock.now().toISOString(),
    events,
  });
  await ctx.deps.engine.applyEvents({
    scope: b.scope!,
    source: "server",
    receivedAt: ctx.clock.now().toISOString(),
    events: [{ id: newId(), eventType: "page_viewed", profileId: "b_visitor" }],
  });
  const segment = await ctx.request("/cdp/segments", a.key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      name: "Has email",
      condition: {
        type: "profilePropertyCondition",
        parameterValues: { propertyName: "properties.email", comparisonOperator: "exists" },
      },
    }),
  });
  if (segment.status !== 200) throw new Error(`segment: ${segment.status}`);
  return { a, b, segmentId: (await segment.json()).id as string };
}

async function _load(ctx: TestContext, brand: SeededBrand, lines: Record<string, unknown>[]) {
  await ctx.sql.begin(async (tx) => {
    for (const raw of lines) {
      await upsertOrder(tx as never, {
        brandId: brand.brandId,
        line: OrderLineSchema.parse(raw),
        newId,
        now: ctx.clock.now(),
      });
    }
  });
}
