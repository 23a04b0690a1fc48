import assert from "node:assert/strict";
import { recordRejectedMessages } from "../../../lib/ingest/rejected_messages.ts";
import { exitProfiles, refreshSegment } from "../../../lib/audiences/membership.ts";
import { membershipDeps } from "../../../lib/runtime/runtime.ts";
import { bumpBrandVersion } from "../../../lib/tenancy/brands.ts";
import { newShopSyncState } from "../../../lib/shopify/shop_sync.ts";
import { shopSyncStateKey } from "../../../lib/store/kv_keys.ts";
import { DATABASE_URL, eventually, type TestContext, withContext } from "../../test_support.ts";
import { APP_ENV, openDashboard, seedDashboard, sessionToken } from "./dashboard_fixture.ts";
import { chartSvg, hiddenValue, statValue, tableRows, textOf } from "./page_html.ts";

const page = (ctx: TestContext, path: string, s: string) =>
  ctx.app.request(`${path}${path.includes("?") ? "&" : "?"}s=${encodeURIComponent(s)}`);

async function html(ctx: TestContext, path: string, s: string): Promise<string> {
  const res = await page(ctx, path, s);
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  assert.match(res.headers.get("content-type")!, /^text\/html/);
  return await res.text();
}

async function api(ctx: TestContext, key: string, path: string) {
  const res = await ctx.request(path, key);
  assert.equal(res.status, 200, `${path}: ${res.status}`);
  return await res.json();
}

const tier = (name: string) => name.replaceAll("_", " ");

Deno.test("dashboard: GET /app verifies the session token, then pages carry a page token and the shop's frame-ancestors", async () => {
  await withContext(async (ctx) => {
    const { a } = await seedDashboard(ctx);
    const token = await sessionToken(ctx, a.scope!);
    const entry = await ctx.app.request(`/app?shop=${a.scope}&id_token=${token}`);
    assert.equal(entry.status, 303);
    const location = new URL(entry.headers.get("location")!, "http://localhost");
    assert.equal(location.pathname, "/app/insights");
    const s = location.searchParams.get("s")!;
    const res = await page(ctx, "/app/insights", s);
    assert.equal(res.status, 200);
    assert.match(
      res.headers.get("content-security-policy")!,
      new RegExp(
        `^frame-ancestors https://${
          a.scope!.replaceAll(".", "\\.")
        } https://admin\\.shopify\\.com;`,
      ),
    );
    assert.equal(res.headers.get("referrer-policy"), "no-referrer");
    const body = await res.text();
    assert.doesNotMatch(body, /<script/i);
    // Every navigation link keeps the session.
    for (const href of body.matchAll(/href="(\/app[^"]*)"/g)) {
      assert.match(href[1]!, /[?&](amp;)?s=/, href[1]);
    }
  }, APP_ENV);
});

Deno.test("dashboard: a missing, expired, forged or foreign token is a 401 page, never data", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seedDashboard(ctx);
    const expect401 = async (path: string, what: string) => {
      const res = await ctx.app.request(path);
      assert.equal(res.status, 401, what);
      const body = await res.text();
      assert.match(body, /data-error="401"/, what);
      assert.doesNotMatch(body, /c\d+@example\.com|secret@other/, what);
      assert.match(res.headers.get("content-security-policy")!, /frame-ancestors/);
    };
    await expect401("/app", "no id_token");
    await expect401(`/app?id_token=${await sessionToken(ctx, a.scope!, { exp: 1 })}`, "expired");
    await expect401(
      `/app?id_token=${await sessionToken(ctx, a.scope!, {}, "another-secret")}`,
      "signed with another secret",
    );
    await expect401(
      `/app?id_token=${await sessionToken(ctx, a.scope!, { aud: "another-app" })}`,
      "another app",
    );
    await expect401(
      `/app?shop=${b.scope}&id_token=${await sessionToken(ctx, a.scope!)}`,
      "shop parameter of another shop",
    );
    await expect401(
      `/app?id_token=${await sessionToken(ctx, "nobody.myshopify.com")}`,
      "a shop without a brand",
    );
    await expect401("/app/insights", "no page token");
    await expect401("/app/insights?s=abc.def", "malformed page token");

    const s = await openDashboard(ctx, a.scope!);
    const [payload, signature] = s.split(".");
    const claims = JSON.parse(atob(payload!.replaceAll("-", "+").replaceAll("_", "/")));
    const forged = btoa(JSON.stringify({ ...claims, b: b.brandId, s: b.scope }))
      .replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    await expect401(`/app/insights?s=${forged}.${signature}`, "claims swapped for brand B");

    ctx.clock.advance(16 * 60_000);
    await expect401(`/app/insights?s=${s}`, "page session past its lifetime");
  }, APP_ENV);
});

Deno.test("dashboard: a page session ends when its brand no longer holds the shop", async () => {
  await withContext(async (ctx) => {
    const { a } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    assert.equal((await page(ctx, "/app/health", s)).status, 200);
    await ctx.sql`delete from integrations where brand_id = ${a.brandId}`;
    await bumpBrandVersion(ctx.kv, a.brandId);
    const res = await page(ctx, "/app/health", s);
    assert.equal(res.status, 401);
  }, APP_ENV);
});

Deno.test("dashboard: another shop's session sees only its own brand; A's customers and segments are 404 to B", async () => {
  await withContext(async (ctx) => {
    const { a, b, segmentId } = await seedDashboard(ctx);
    const sb = await openDashboard(ctx, b.scope!);
    const insights = await html(ctx, "/app/insights", sb);
    assert.doesNotMatch(insights, /c\d+@example\.com/);
    assert.deepEqual(tableRows(insights, "ltv").map((r) => r[1]), ["0", "0", "0", "0", "1"]);
    for (const path of [`/app/customers/c1@example.com`, `/app/segments/${segmentId}`]) {
      const res = await page(ctx, path, sb);
      assert.equal(res.status, 404, path);
      assert.doesNotMatch(await res.text(), /c1@example\.com|Has email/);
    }
    const sa = await openDashboard(ctx, a.scope!);
    assert.equal((await page(ctx, "/app/customers/secret@other.example", sa)).status, 404);
  }, APP_ENV);
});

Deno.test("dashboard: without the app secret the pages answer 503", async () => {
  await withContext(async (ctx) => {
    const res = await ctx.app.request("/app?id_token=x.y.z");
    assert.equal(res.status, 503);
    assert.match(await res.text(), /data-error="503"/);
  });
});

Deno.test("insights page: every number equals the insights API's on the same data", async () => {
  await withContext(async (ctx) => {
    const { a } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    const body = await html(ctx, "/app/insights", s);

    const ltv = await api(ctx, a.key, "/cdp/insights/ltv");
    assert.deepEqual(
      tableRows(body, "ltv"),
      ltv.distribution.map((d: { label: string; customer_count: number }) => [
        d.label,
        String(d.customer_count),
      ]),
    );
    assert.match(
      textOf(body),
      new RegExp(
        `${ltv.customer_count} customers with completed orders, total revenue ${ltv.total_revenue}`,
      ),
    );

    const rfm = await api(ctx, a.key, "/cdp/insights/rfm");
    assert.deepEqual(
      tableRows(body, "rfm"),
      Object.keys(rfm.tiers).map((t) => [tier(t), String(rfm.tiers[t]), rfm.tier_revenue[t]]),
    );

    const products = await api(ctx, a.key, "/cdp/insights/products?limit=10");
    assert.ok(products.list.length > 0);
    assert.deepEqual(
      tableRows(body, "products"),
      products.list.map((p: Record<string, unknown>) =>
        [p.title, p.revenue, p.quantity, p.order_count, p.customer_count].map(String)
      ),
    );

    const revenue = await api(ctx, a.key, "/cdp/insights/revenue");
    assert.ok(revenue.list.length > 1);
    assert.deepEqual(
      tableRows(body, "revenue"),
      revenue.list.map((m: Record<string, unknown>) =>
        [m.month, m.revenue, m.order_count].map(String)
      ),
    );

    const events = await api(ctx, a.key, "/cdp/insights/events");
    assert.equal(events.list.length, 30);
    assert.ok(events.list.some((d: { events: number }) => d.events > 0));
    assert.deepEqual(
      tableRows(body, "events"),
      events.list.map((d: Record<string, unknown>) => [d.day, d.events].map(String)),
    );

    const atRisk = await api(ctx, a.key, "/cdp/insights/at-risk?limit=10&offset=0");
    assert.ok(atRisk.list.length > 0);
    assert.deepEqual(
      tableRows(body, "at-risk"),
      atRisk.list.map((c: Record<string, unknown>) =>
        [c.email, c.ltv, c.order_count, c.days_since_last_order, c.at_risk_score].map(String)
      ),
    );
    // Each at-risk customer links to its record, by email when it has one.
    const first = atRisk.list[0];
    assert.match(body, new RegExp(`href="/app/customers/${encodeURIComponent(first.email)}\\?s=`));
    for (const chart of ["ltv", "rfm", "products", "revenue", "events"]) {
      assert.match(chartSvg(body, chart), /<path|<rect/, chart);
    }
  }, APP_ENV);
});

Deno.test("insights page: the at-risk table pages like the API, and a bad offset is a 400 page", async () => {
  await withContext(async (ctx) => {
    const { a } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    const second = await html(ctx, "/app/insights?offset=10", s);
    const atRisk = await api(ctx, a.key, "/cdp/insights/at-risk?limit=10&offset=10");
    assert.deepEqual(
      tableRows(second, "at-risk").map((r) => r[0]),
      atRisk.list.map((c: { email: string }) => c.email),
    );
    assert.equal((await page(ctx, "/app/insights?offset=-1", s)).status, 400);
  }, APP_ENV);
});

Deno.test("customer page: the record, insights and orders equal the customer API's", async () => {
  await withContext(async (ctx) => {
    const { a, segmentId } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    for (const identifier of ["c4@example.com", "store_acme_1009"]) {
      const body = await html(ctx, `/app/customers/${encodeURIComponent(identifier)}`, s);
      const path = `/cdp/customers/${encodeURIComponent(identifier)}`;
      const { insights } = await api(ctx, a.key, `${path}/insights`);
      assert.equal(statValue(body, "ltv"), insights.ltv);
      assert.equal(statValue(body, "order_count"), String(insights.order_count));
      assert.equal(statValue(body, "aov"), insights.aov);
      assert.equal(statValue(body, "rfm"), tier(insights.rfm.tier));
      assert.equal(statValue(body, "churn"), String(insights.churn.at_risk_score));
      assert.deepEqual(
        tableRows(body, "top-products"),
        insights.top_products.map((p: Record<string, unknown>) =>
          [p.title, p.revenue, p.quantity].map(String)
        ),
      );
      const orders = await api(ctx, a.key, `${path}/orders?limit=20`);
      assert.deepEqual(
        tableRows(body, "orders"),
        orders.list.map((
          o: {
            number: string;
            created_at: string;
            state: string;
            total: string;
            currency_code: string;
          },
        ) => [
          o.number,
          o.created_at.slice(0, 10),
          o.state,
          `${o.total} ${o.currency_code}`,
        ]),
      );
      const record = await api(ctx, a.key, path);
      assert.deepEqual(record.profile.segments, [segmentId]);
      assert.match(body, new RegExp(`data-list="segments">[\\s\\S]*?${segmentId}`));
      assert.match(chartSvg(body, "orders"), /<path/);
    }
    const search = await page(ctx, "/app/customers?q=%2B15550000000", s);
    assert.equal(search.status, 404);
    assert.match(await search.text(), /data-error="404"/);
    assert.equal((await page(ctx, "/app/customers?q=c5%40example.com", s)).status, 200);
  }, APP_ENV);
});

Deno.test("segments pages: member counts equal the members API's; the condition reads; the export is the API's", async () => {
  await withContext(async (ctx) => {
    const { a, segmentId } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    const list = await html(ctx, "/app/segments", s);
    const members = await api(ctx, a.key, `/cdp/segments/${segmentId}/members?limit=20`);
    assert.equal(members.totalSize, 12);
    assert.deepEqual(tableRows(list, "segments"), [["Has email", segmentId, "12"]]);

    const one = await html(ctx, `/app/segments/${encodeURIComponent(segmentId)}`, s);
    assert.equal(statValue(one, "members"), "12");
    assert.match(textOf(one), /all of .*properties\.email exists/);
    assert.deepEqual(
      tableRows(one, "members").map((r) => r[0]),
      members.list.map((p: { itemId: string }) => p.itemId),
    );

    const exported = await page(ctx, `/app/segments/${encodeURIComponent(segmentId)}/export`, s);
    assert.equal(exported.status, 200);
    assert.equal(exported.headers.get("content-type"), "application/x-ndjson");
    const fromApi = await ctx.request(`/cdp/segments/${segmentId}/export`, a.key);
    assert.equal(await exported.text(), await fromApi.text());
    // HEAD gives the export's connection back at once; the pool serves the next page.
    const head = await ctx.app.request(
      `/app/segments/${encodeURIComponent(segmentId)}/export?s=${encodeURIComponent(s)}`,
      { method: "HEAD" },
    );
    assert.equal(head.status, 200);
    assert.equal(await head.text(), "");
    assert.equal(
      statValue(await html(ctx, `/app/segments/${encodeURIComponent(segmentId)}`, s), "members"),
      "12",
    );
  }, APP_ENV);
});

Deno.test("keys page: issue, rotate and revoke through forms with the CSRF token, under the API's rules", async () => {
  await withContext(async (ctx) => {
    const { a } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    const keys = await html(ctx, "/app/keys", s);
    const csrf = hiddenValue(keys, "csrf");
    assert.equal(hiddenValue(keys, "s"), s);
    const post = (path: string, fields: Record<string, string>) =>
      ctx.app.request(path, { method: "POST", body: new URLSearchParams(fields) });

    const issued = await post("/app/keys/issue", { s, csrf, name: "  dashboard  " });
    assert.equal(issued.status, 200);
    const issuedBody = await issued.text();
    const plaintext = /<p class="mono" data-plaintext="true">(svc_[0-9A-Za-z]+)<\/p>/.exec(
      issuedBody,
    )
      ?.[1];
    assert.ok(plaintext, "the plaintext is shown once");
    assert.equal((await ctx.request("/cdp/events/types", plaintext)).status, 200);
    // The list page never shows it again.
    assert.doesNotMatch(await html(ctx, "/app/keys", s), new RegExp(plaintext));

    const listed = await ctx.request("/cdp/keys", await sessionToken(ctx, a.scope!));
    const dashboardKey = (await listed.json()).list.find((k: { name: string }) =>
      k.name === "dashboard"
    );
    assert.ok(dashboardKey);

    const rotated = await post("/app/keys/rotate", { s, csrf, id: dashboardKey.id });
    assert.equal(rotated.status, 200);
    const rotatedBody = await rotated.text();
    const next = /data-plaintext="true">(svc_[0-9A-Za-z]+)</.exec(rotatedBody)?.[1];
    assert.ok(next && next !== plaintext);
    assert.match(rotatedBody, new RegExp(`previous key ${dashboardKey.id} stops working`));

    const revoked = await post("/app/keys/revoke", { s, csrf, id: dashboardKey.id });
    assert.equal(revoked.status, 200);
    assert.equal((await ctx.request("/cdp/events/types", plaintext)).status, 401);
    const again = await post("/app/keys/rotate", { s, csrf, id: dashboardKey.id });
    assert.equal(again.status, 409);
    assert.equal((await post("/app/keys/revoke", { s, csrf, id: "key_nope" })).status, 404);
    assert.equal((await post("/app/keys/issue", { s, csrf, name: "x".repeat(101) })).status, 400);
  }, APP_ENV);
});

Deno.test("keys page: a form without the session's CSRF token is refused and changes nothing", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    const other = await openDashboard(ctx, a.scope!);
    const otherCsrf = hiddenValue(await html(ctx, "/app/keys", other), "csrf");
    const bCsrf = hiddenValue(
      await html(ctx, "/app/keys", await openDashboard(ctx, b.scope!)),
      "csrf",
    );
    const count = async () =>
      (await (await ctx.request("/cdp/keys", await sessionToken(ctx, a.scope!))).json()).totalSize;
    const before = await count();
    for (
      const [fields, what] of [
        [{ s, name: "x" }, "no csrf"],
        [{ s, name: "x", csrf: "A".repeat(43) }, "a made-up csrf"],
        [{ s, name: "x", csrf: otherCsrf }, "another session's csrf"],
        [{ s, name: "x", csrf: bCsrf }, "another shop's csrf"],
      ] as const
    ) {
      const res = await ctx.app.request("/app/keys/issue", {
        method: "POST",
        body: new URLSearchParams(fields),
      });
      assert.equal(res.status, 403, what);
      assert.match(await res.text(), /data-error="403"/);
    }
    const noSession = await ctx.app.request("/app/keys/issue", {
      method: "POST",
      body: new URLSearchParams({ name: "x" }),
    });
    assert.equal(noSession.status, 401);
    assert.equal(await count(), before);
  }, APP_ENV);
});

Deno.test("health page: backlog, dead letters, the last webhook and the last backfill", async () => {
  await withContext(async (ctx) => {
    const { a } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    let body = await html(ctx, "/app/health", s);
    assert.equal(statValue(body, "backlog"), "0");
    assert.equal(statValue(body, "dead-letters"), "0");
    assert.equal(statValue(body, "rejected"), "0");
    assert.equal(statValue(body, "last-webhook"), "none");
    assert.equal(statValue(body, "last-backfill"), "none");

    const webhook = JSON.stringify({ id: 1 });
    const key = await crypto.subtle.importKey(
      "raw",
      new TextEncoder().encode(APP_ENV.SHOPIFY_API_SECRET),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    const hmac = btoa(String.fromCharCode(
      ...new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(webhook))),
    ));
    const delivered = await ctx.app.request("/webhooks/shopify", {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Shopify-Topic": "shop/update",
        "X-Shopify-Shop-Domain": a.scope!,
        "X-Shopify-Webhook-Id": "w-1",
        "X-Shopify-Hmac-Sha256": hmac,
      },
      body: webhook,
    });
    assert.equal(delivered.status, 200);
    await ctx.kv.set(["dead_letters", "m1"], {
      deadLetter: true,
      message: {
        kind: "events",
        id: "m1",
        brandId: a.brandId,
        batch: { scope: a.scope, source: "server", receivedAt: "2026-11-20T00:00:00Z", events: [] },
      },
      reason: "rejected",
      failedAt: "2026-11-20T00:00:00.000Z",
    });
    body = await html(ctx, "/app/health", s);
    assert.equal(
      statValue(body, "last-webhook"),
      ctx.clock.now().toISOString().slice(0, 16).replace("T", " "),
    );
    assert.match(body, /shop\/update: ignored/);
    assert.equal(statValue(body, "dead-letters"), "1");
    assert.deepEqual(tableRows(body, "dead-letters"), [[
      "m1",
      "2026-11-20T00:00:00.000Z",
      "0",
      "rejected",
    ]]);
    await recordRejectedMessages(
      ctx.kv,
      {
        brandId: a.brandId,
        door: "POST /v1/batch",
        at: new Date("2026-11-20T00:00:00Z"),
        newId: ctx.deps.newId,
      },
      [{ index: 3, errors: [{ path: "$.batch[3].userId", message: "must not contain ':'" }] }],
      [],
    );
    body = await html(ctx, "/app/health", s);
    assert.equal(statValue(body, "rejected"), "1");
    assert.deepEqual(tableRows(body, "rejected"), [[
      "2026-11-20T00:00:00.000Z",
      "POST /v1/batch",
      "3",
      "$.batch[3].userId: must not contain ':'",
    ]]);
  }, APP_ENV);
});

Deno.test("health page: the last backfill is the brand's latest shop sync", async () => {
  await withContext(async (ctx) => {
    const { a } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    assert.equal(statValue(await html(ctx, "/app/health", s), "last-backfill"), "none");
    const queued = newShopSyncState(
      { runId: "01M86TDT9CSKW28VQJZ3VT7SDR", brandId: a.brandId, since: null, only: null },
      new Date("2026-11-20T10:00:00.000Z"),
    );
    await ctx.kv.set(shopSyncStateKey(a.brandId), {
      ...queued,
      status: "completed",
      startedAt: "2026-11-20T10:00:00.000Z",
      finishedAt: "2026-11-20T10:05:00.000Z",
      counts: { orders: 1200, customers: 300, lineItems: 2400, rejected: 0 },
    });
    const body = await html(ctx, "/app/health", s);
    assert.equal(statValue(body, "last-backfill"), "completed");
    assert.match(body, /1200 orders, 300 customers, 2400 line items, 0 rejected/);
  }, APP_ENV);
});

/** Resolves with `promise`, or rejects once `ms` have passed (a hang fails the test). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const defineSegment = async (ctx: TestContext, key: string, name: string, condition: unknown) => {
  const res = await ctx.request("/cdp/segments", key, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name, condition }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).id as string;
};

Deno.test("segments and customer pages: their condition reads run on the brand's heavy-read share; with it taken, counts show — and segments are unknown", async () => {
  await withContext(async (ctx) => {
    const { a, segmentId } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    // The test pool has 4 connections: 2 heavy reads per brand. An export holds its permit until
    // its body is read.
    const exports = [
      await ctx.request(`/cdp/segments/${segmentId}/export`, a.key),
      await ctx.request(`/cdp/segments/${segmentId}/export`, a.key),
    ];
    assert.deepEqual(exports.map((r) => r.status), [200, 200]);
    const list = await html(ctx, "/app/segments", s);
    assert.deepEqual(tableRows(list, "segments"), [["Has email", segmentId, "—"]]);
    assert.match(list, /data-note="unknown-counts"/);
    const one = await page(ctx, `/app/segments/${encodeURIComponent(segmentId)}`, s);
    assert.equal(one.status, 429);
    assert.match(await one.text(), /data-error="429"/);
    const customer = await html(ctx, "/app/customers/c4%40example.com", s);
    assert.match(customer, new RegExp(`data-list="segments-unknown">[\\s\\S]*?${segmentId}`));
    for (const res of exports) await res.text();
    // The share given back, the same pages count again.
    assert.deepEqual(tableRows(await html(ctx, "/app/segments", s), "segments"), [[
      "Has email",
      segmentId,
      "12",
    ]]);
    assert.doesNotMatch(await html(ctx, "/app/segments", s), /data-note="unknown-counts"/);
  }, APP_ENV);
});

Deno.test(
  "segments page: one brand's counts hold at most its share of the pool; another brand reads meanwhile",
  {
    // Counting another session's lock waits needs a server: PGlite runs one session.
    ignore: !DATABASE_URL,
  },
  async () => {
    await withContext(async (ctx) => {
      const { a, b } = await seedDashboard(ctx);
      for (let i = 0; i < 6; i++) {
        await defineSegment(ctx, a.key, `Visits ${i}`, {
          type: "profilePropertyCondition",
          parameterValues: {
            propertyName: "properties.nbOfVisits",
            comparisonOperator: "greaterThan",
            propertyValueInteger: i,
          },
        });
      }
      const s = await openDashboard(ctx, a.scope!);
      // Every count of A's page waits for this lock, holding its connection: how many connections
      // the page takes at once is then plain to see (the test pool has 4; a brand's share is 2).
      const holder = await ctx.sql.reserve();
      let pageLoad: Promise<Response> | undefined;
      try {
        await holder`begin`;
        await holder`lock table profiles in access exclusive mode`;
        const waiting = async () => {
          await holder`select pg_stat_clear_snapshot()`;
          const [row] = await holder<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'
            and pid <> pg_backend_pid()`;
          return row!.n;
        };
        pageLoad = Promise.resolve(page(ctx, "/app/segments", s));
        let most = 0;
        await eventually(async () => {
          most = Math.max(most, await waiting());
          return most >= 2;
        });
        // A's page is in progress (7 counts to make); B's segment list answers meanwhile.
        const listB = await within(ctx.request("/cdp/segments", b.key), 10_000, "B's segment list");
        assert.equal(listB.status, 200);
        assert.equal((await listB.json()).scope, b.scope);
        most = Math.max(most, await waiting());
        assert.equal(most, 2, "A's page held more connections than its share");
      } finally {
        await holder`rollback`;
        holder.release();
      }
      const res = await pageLoad!;
      assert.equal(res.status, 200);
      assert.equal(tableRows(await res.text(), "segments").length, 7);
    }, APP_ENV);
  },
);

Deno.test("dashboard: pages count against the brand's API ceiling; past it a 429 error page with Retry-After, other brands unaffected", async () => {
  await withContext(async (ctx) => {
    const { a, b } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    const sB = await openDashboard(ctx, b.scope!);
    // Seeding may already have spent some of A's window: read what is left from the first page.
    const first = await page(ctx, "/app/segments", s);
    assert.equal(first.status, 200);
    await first.text();
    const left = Number(first.headers.get("ratelimit-remaining"));
    assert.ok(Number.isInteger(left) && left < 20, String(left));
    // The brand's API requests and its pages share the ceiling.
    for (let i = 0; i < left; i++) {
      const res = i % 2 === 0
        ? await page(ctx, "/app/segments", s)
        : await ctx.request("/cdp/segments", a.key);
      assert.equal(res.status, 200, `request ${i}`);
      await res.body?.cancel();
    }
    for (const path of ["/app/segments", "/app/customers/c4%40example.com", "/app/keys"]) {
      const refused = await page(ctx, path, s);
      assert.equal(refused.status, 429, path);
      assert.match(refused.headers.get("content-type")!, /^text\/html/);
      assert.ok(Number(refused.headers.get("retry-after")) >= 1, path);
      const body = await refused.text();
      assert.match(body, /data-error="429"/);
      assert.match(body, /per brand/);
    }
    assert.equal((await ctx.request("/cdp/segments", a.key)).status, 429);
    // Another brand's pages and API are counted apart.
    assert.equal((await html(ctx, "/app/segments", sB)).length > 0, true);
    assert.equal((await ctx.request("/cdp/segments", b.key)).status, 200);
    // The next window admits A again.
    ctx.clock.advance(60_000);
    await html(ctx, "/app/segments", s);
  }, { ...APP_ENV, BRAND_RATE_LIMIT_PER_MINUTE: "12" });
});

Deno.test("segments and customer pages: a stored segment that no longer validates shows — and is unknown; the pages 200 without the database's message", async () => {
  await withContext(async (ctx) => {
    const { a, segmentId } = await seedDashboard(ctx);
    const s = await openDashboard(ctx, a.scope!);
    // Saved before the cost rule refused it, written as the store holds it.
    const broken = `seg__${a.scope}__broken`;
    await ctx.sql`
      insert into segments (scope, id, name, condition, created_at, updated_at)
      values (${a.scope!}, ${broken}, 'Broken', ${
      JSON.stringify({
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.email",
          comparisonOperator: "matchesRegex",
          propertyValue: "(.?){255}".repeat(22),
        },
      })
    }::text::json, now(), now())`;
    const list = await html(ctx, "/app/segments", s);
    assert.deepEqual(tableRows(list, "segments"), [
      ["Broken", broken, "—"],
      ["Has email", segmentId, "12"],
    ]);
    assert.doesNotMatch(list, /regular expression|too costly/i);
    const customer = await html(ctx, "/app/customers/c4%40example.com", s);
    assert.match(customer, new RegExp(`data-list="segments-unknown">[\\s\\S]*?${broken}`));
    assert.match(customer, new RegExp(`data-list="segments">[\\s\\S]*?${segmentId}`));
    assert.doesNotMatch(customer, /regular expression|too costly/i);
  }, APP_ENV);
});

Deno.test("segment page: members entered and exited per day, as the change feed has them", async () => {
  await withContext(async (ctx) => {
    const { a, segmentId } = await seedDashboard(ctx);
    const deps = membershipDeps({
      sql: ctx.sql,
      config: ctx.config,
      now: ctx.clock.now,
    });
    await refreshSegment(deps, a.scope!, segmentId);
    const day1 = ctx.clock.now().toISOString().slice(0, 10);
    ctx.clock.advance(86_400_000);
    const feed = await api(ctx, a.key, `/cdp/segments/${segmentId}/changes?limit=100`);
    const leaving = feed.list.slice(0, 2).map((c: { profileId: string }) => c.profileId);
    await ctx.sql.begin((tx) =>
      exitProfiles(tx, {
        scope: a.scope!,
        profileIds: leaving,
        now: ctx.clock.now(),
      })
    );
    const day2 = ctx.clock.now().toISOString().slice(0, 10);
    const s = await openDashboard(ctx, a.scope!);
    const one = await html(ctx, `/app/segments/${encodeURIComponent(segmentId)}`, s);
    assert.deepEqual(tableRows(one, "membership"), [[day2, "0", "2"], [day1, "12", "0"]]);
    assert.equal(feed.list.length, 12);
    assert.match(chartSvg(one, "membership"), /<path/);
  }, APP_ENV);
});
