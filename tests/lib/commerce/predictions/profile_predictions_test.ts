import assert from "node:assert/strict";
import { fitBrandPredictions } from "../../../../lib/commerce/predictions/brand_predictions.ts";
import type { TestContext } from "../../../test_support.ts";
import { withBrandDatabase, withContext } from "../../../test_support.ts";
import type { FittedModel } from "../../../../lib/commerce/predictions/model_fit.ts";
import { replaceProfilePredictions } from "../../../../lib/commerce/predictions/profile_predictions.ts";
import { checkUpdateProperties } from "../../../../lib/engine/update_properties.ts";
import { loadOrders, syntheticOrders } from "./order_fixture.ts";

const ENV = { PREDICTIONS_MIN_CUSTOMERS: "40", PREDICTIONS_MIN_HISTORY_DAYS: "180" };
const DAY = 86_400_000;

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;

const json = (body: unknown) => ({
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify(body),
});

const predicate = (name: string, operator: string, value?: number) => ({
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: `predictions.${name}`,
    comparisonOperator: operator,
    ...(value === undefined ? {} : { propertyValueDouble: value }),
  },
});

/** Profiles `<prefix><i>` with the emails of the synthetic customers 0..count-1. */
async function profiles(ctx: TestContext, scope: string, prefix: string, count: number) {
  await ctx.deps.engine.applyEvents({
    scope,
    source: "server",
    receivedAt: ctx.clock.now().toISOString(),
    events: Array.from({ length: count }, (_, i) => ({
      id: ctx.deps.newId(),
      eventType: "updateProperties",
      profileId: `${prefix}${i}`,
      properties: { update: { "properties.email": `c${i}@example.com` } },
    })),
  });
}

async function fit(ctx: TestContext, brandId: string, minCustomers?: number) {
  const settings = { ...ctx.config.predictions, ...(minCustomers ? { minCustomers } : {}) };
  return await fitBrandPredictions(
    { sql: ctx.sql, kv: ctx.kv, now: ctx.clock.now, settings },
    brandId,
  );
}

/** Each profile's `insights.predicted` from GET /cdp/customers/{id}/insights. */
async function predicted(ctx: TestContext, brand: Brand, ids: string[]) {
  const out = new Map<string, Record<string, unknown> | null>();
  for (const id of ids) {
    const res = await ctx.request(`/cdp/customers/${id}/insights`, brand.key);
    assert.equal(res.status, 200, id);
    out.set(id, (await res.json()).insights.predicted);
  }
  return out;
}

/** A new segment's members (its export, which pages 10,000 at a time), sorted. */
async function members(ctx: TestContext, brand: Brand, condition: unknown): Promise<string[]> {
  return (await exported(ctx, brand, condition)).map((line) => line.id as string).sort();
}

async function exported(ctx: TestContext, brand: Brand, condition: unknown) {
  const res = await ctx.request(
    "/cdp/segments",
    brand.key,
    json({ name: `s${crypto.randomUUID()}`, condition }),
  );
  assert.equal(res.status, 200, await res.clone().text());
  const { id } = await res.json();
  const text = await (await ctx.request(`/cdp/segments/${id}/export`, brand.key)).text();
  return text.split("\n").filter(Boolean).map((line) => JSON.parse(line));
}

const below = (map: Map<string, Record<string, unknown> | null>, limit: number) =>
  [...map].filter(([, p]) => p !== null && (p.p_alive as number) < limit).map(([id]) => id)
    .sort();

Deno.test("predictions in conditions and exports: the insights' values, per brand, replaced at each refit", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    await loadOrders(ctx.sql, a.brandId, syntheticOrders(120, 500, ctx.clock.now()));
    await loadOrders(ctx.sql, b.brandId, syntheticOrders(60, 400, ctx.clock.now()));
    await profiles(ctx, a.scope!, "a", 120);
    await profiles(ctx, b.scope!, "b", 60);
    // A profile no contact matches, and one whose email differs only by case and spaces.
    await ctx.deps.engine.applyEvents({
      scope: a.scope!,
      source: "server",
      receivedAt: ctx.clock.now().toISOString(),
      events: [
        {
          id: ctx.deps.newId(),
          eventType: "updateProperties",
          profileId: "stranger",
          properties: { update: { "properties.email": "nobody@example.com" } },
        },
        {
          id: ctx.deps.newId(),
          eventType: "updateProperties",
          profileId: "shouty",
          // A fraction in an identity field: its export line is written by exportLine, not SQL.
          properties: {
            update: { "properties.email": " C7@Example.COM ", "properties.zipCode": 1.5 },
          },
        },
      ],
    });
    const churn = predicate("p_alive", "lessThan", 0.5);
    // Before any fit: no profile has predictions.
    assert.deepEqual(await members(ctx, a, churn), []);

    assert.equal((await fit(ctx, a.brandId)).status, "ready");
    const aIds = [...Array.from({ length: 120 }, (_, i) => `a${i}`), "stranger", "shouty"];
    const seenA = await predicted(ctx, a, aIds);
    assert.equal(seenA.get("stranger"), null);
    assert.deepEqual(seenA.get("shouty"), seenA.get("a7"));
    const expected = below(seenA, 0.5);
    assert.ok(expected.length > 0 && expected.length < 121, String(expected.length));
    assert.deepEqual(await members(ctx, a, churn), expected);
    assert.deepEqual(await members(ctx, a, predicate("p_alive", "missing")), ["stranger"]);
    // Brand b has no fit yet: a's predictions never match b's profiles (same emails).
    assert.deepEqual(await members(ctx, b, predicate("p_alive", "exists")), []);

    // Every number of the family compares as a number, the date as a date.
    const clv = [...seenA].filter(([, p]) => p && Number(p.predicted_clv_365d) >= 50)
      .map(([id]) => id).sort();
    assert.deepEqual(
      await members(ctx, a, predicate("predicted_clv_365d", "greaterThanOrEqualTo", 50)),
      clv,
    );
    const soon = [...seenA].filter(([, p]) =>
      p?.expected_next_order_at &&
      Date.parse(p.expected_next_order_at as string) < ctx.clock.now().getTime() + 30 * DAY
    ).map(([id]) => id).sort();
    assert.deepEqual(
      await members(ctx, a, {
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "predictions.expected_next_order_at",
          comparisonOperator: "lessThan",
          propertyValueDateExpr: "now+30d",
        },
      }),
      soon,
    );

    // The export carries the predictions of the profiles that have them, nothing otherwise.
    const lines = await exported(ctx, a, {
      type: "profilePropertyCondition",
      parameterValues: { propertyName: "properties.email", comparisonOperator: "exists" },
    });
    assert.equal(lines.length, 122);
    for (const line of lines) {
      const p = seenA.get(line.id)!;
      if (p === null) {
        assert.equal("predictions" in line, false, line.id);
        continue;
      }
      assert.deepEqual(line.predictions, {
        p_alive: p.p_alive,
        predicted_clv_365d: p.predicted_clv_365d,
        expected_orders_365d: p.expected_orders_365d,
      }, line.id);
    }

    // Brand b's own fit: its profiles get b's predictions, a's segment is unchanged.
    assert.equal((await fit(ctx, b.brandId)).status, "ready");
    const seenB = await predicted(ctx, b, Array.from({ length: 60 }, (_, i) => `b${i}`));
    assert.deepEqual(await members(ctx, b, churn), below(seenB, 0.5));
    assert.deepEqual(await members(ctx, a, churn), expected);

    // A refit a month later replaces a's rows with values as of then.
    ctx.clock.advance(30 * DAY);
    assert.equal((await fit(ctx, a.brandId)).status, "ready");
    const later = await predicted(ctx, a, aIds);
    assert.notDeepEqual(later.get("a0"), seenA.get("a0"));
    assert.deepEqual(await members(ctx, a, churn), below(later, 0.5));
    const [rows] = await ctx.sql<{ n: number; at: Date }[]>`
      select count(*)::int as n, min(fitted_at) as at from profile_predictions
      where scope = ${a.scope!}`;
    assert.deepEqual([rows!.n, rows!.at.getTime()], [121, ctx.clock.now().getTime()]);

    // A refit short of the rules leaves the brand without predictions; b keeps its own.
    assert.equal((await fit(ctx, a.brandId, 100_000)).status, "insufficient_data");
    assert.deepEqual(await members(ctx, a, predicate("p_alive", "exists")), []);
    assert.equal((await members(ctx, b, predicate("p_alive", "exists"))).length, 60);
  }, ENV);
});

Deno.test("predictions.* names: a closed family of numbers and a date, never written by events", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const refused = async (condition: unknown) => {
      const res = await ctx.request("/cdp/segments", a.key, json({ name: "x", condition }));
      assert.equal(res.status, 400, JSON.stringify(condition));
      await res.body?.cancel();
    };
    await refused(predicate("churn", "exists"));
    await refused({
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "predictions.p_alive",
        comparisonOperator: "equals",
        propertyValue: "high",
      },
    });
    // An event cannot set them: updateProperties writes under properties.* only.
    assert.equal(
      checkUpdateProperties({ update: { "predictions.p_alive": 0.1 } }),
      'properties.update["predictions.p_alive"]: keys must start with properties.',
    );
  }, ENV);
});

Deno.test("replaceProfilePredictions: a profile takes its customer record's contact (Shopify id, email, phone)", async () => {
  await withBrandDatabase(async (sql, brandId) => {
    const contact = (
      id: string,
      shopify: string | null,
      email: string | null,
      phone: string | null,
    ) =>
      sql`insert into contacts (id, brand_id, shopify_customer_id, email, phone, created_at, updated_at)
          values (${id}, ${brandId}, ${shopify}, ${email}, ${phone}, now(), now())`;
    await contact("X", "1", "x@example.com", null);
    await contact("Y", null, "y@example.com", null);
    await contact("Z", null, null, "+16135551111");
    await contact("V", "2", null, null);
    const profile = (id: string, properties: Record<string, unknown>) =>
      sql`insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
          values ('b.myshopify.com', ${id}, ${JSON.stringify(properties)}::text::jsonb, 'server',
                  now(), now())`;
    await profile("P1", { shopifyCustomerId: "1", email: "y@example.com" });
    await profile("P2", { shopifyCustomerId: "999", email: " Y@Example.com" });
    await profile("P3", { phoneNumber: "(+1) 613.555.1111" });
    // Its own contact (V) has no predictions: another contact's are not borrowed.
    await profile("P4", { shopifyCustomerId: 2, email: "x@example.com" });
    await profile("P5", { phoneNumber: "613 555 1111" });
    await profile("P6", { email: ["x@example.com"] });
    const columns = (ids: string[], pAlive: string) => ({
      contactIds: ids,
      pAlive: ids.map(() => pAlive),
      expectedOrders90d: ids.map(() => "0.1"),
      expectedOrders365d: ids.map(() => "0.4"),
      predictedClv365d: ids.map(() => "10.00"),
      waitDays: ids.map((_, i) => (i === 0 ? 1.5 : null)),
    });
    const model = { selected: "mbgnbd" } as FittedModel;
    const fittedAt = new Date("2026-11-21T00:00:00Z");
    const replace = (fit: Parameters<typeof replaceProfilePredictions>[2]) =>
      sql.begin((tx) => replaceProfilePredictions(tx, brandId, fit));
    const n = await replace({ model, fittedAt, columns: columns(["X", "Y", "Z"], "0.3") });
    assert.equal(n, 3);
    const rows = await sql<{ profile_id: string; p_alive: string; next: Date | null }[]>`
      select profile_id, p_alive, expected_next_order_at as next from profile_predictions
      order by profile_id`;
    assert.deepEqual(rows.map((r) => r.profile_id), ["P1", "P2", "P3"]);
    assert.equal(rows[0]!.next!.toISOString(), "2026-11-22T12:00:00.000Z");
    // Erasing a profile (shop/redact, a merge) takes its row with it.
    await sql`delete from profiles where item_id = 'P3'`;
    assert.deepEqual(
      (await sql`select profile_id from profile_predictions order by 1`).map((r) => r.profile_id),
      ["P1", "P2"],
    );
    // Replaced wholesale: a contact no longer predicted loses its profile's row.
    await replace({ model, fittedAt, columns: columns(["Y"], "0.9") });
    assert.deepEqual(
      [...await sql`select profile_id, p_alive::text from profile_predictions`],
      [{ profile_id: "P2", p_alive: "0.9" }],
    );
    assert.equal(await replace(null), 0);
    assert.equal((await sql`select 1 from profile_predictions`).length, 0);
  });
});
