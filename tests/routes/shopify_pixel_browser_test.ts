/**
 * The web pixel extension's own code (extensions/web-pixel/src/index.ts, bundled with
 * `@shopify/web-pixels-extension` from npm by `deno bundle` at test time) in headless Chromium
 * (Debian's `chromium`), inside a harness that does what Shopify's strict sandbox does: the
 * pixel runs in a Web Worker (no DOM, `window` or `document`), `register` reaches the harness's
 * `shopify.extend`, and its API is `analytics.subscribe`, `browser.sendBeacon`, `init`,
 * `settings` and `customerPrivacy`. Shopify's documented sample events are published to it, and it
 * posts to the service over a real port. Skipped where /usr/bin/chromium is missing.
 */
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { bundleForBrowser, eventually, type TestContext, withContext } from "../test_support.ts";
import { ENV, fixture, forwarder, orderWebhook, VISITOR } from "./shopify_pixel_support.ts";

const CHROMIUM = "/usr/bin/chromium";
const installed = await Deno.stat(CHROMIUM).then(() => true, () => false);
const ENTRY = new URL("../../extensions/web-pixel/src/index.ts", import.meta.url).pathname;

// The sandbox: a module worker. `shopify.extend` is what `register` calls; the page sends the
// render's init and then the events, as Shopify's pixel manager does.
const SANDBOX = `
const subscribers = new Map();
const privacy = new Map();
let render = null;
self.shopify = { extend(point, fn) { if (point === "WebPixel::Render") render = fn; } };
const beacons = [];
const browser = {
  // The sandbox runs sendBeacon in the top frame; here the worker posts it with keepalive.
  sendBeacon: (url, body) => fetch(url, { method: "POST", body, keepalive: true })
    .then(() => { beacons.push(url); return true; }, () => false),
  cookie: { get: async () => "", set: async () => "" },
  localStorage: { getItem: async () => null, setItem: async () => {} },
  sessionStorage: { getItem: async () => null, setItem: async () => {} },
};
await import("/pixel.js");
self.onmessage = ({ data }) => {
  if (data.type === "render") {
    render({
      analytics: {
        subscribe(name, cb) {
          subscribers.set(name, [...(subscribers.get(name) ?? []), cb]);
          return () => true;
        },
      },
      browser,
      init: data.init,
      settings: data.settings,
      customerPrivacy: {
        subscribe(name, cb) { privacy.set(name, [...(privacy.get(name) ?? []), cb]); },
      },
      _pixelInfo: {},
    });
  } else if (data.type === "event") {
    for (const name of ["all_events", "all_standard_events", data.event.name]) {
      for (const cb of subscribers.get(name) ?? []) cb(data.event);
    }
  } else if (data.type === "consent") {
    for (const cb of privacy.get("visitorConsentCollected") ?? []) {
      cb({ customerPrivacy: data.customerPrivacy });
    }
  }
  self.postMessage({ done: data.seq });
};
self.postMessage({ ready: typeof window === "undefined" && typeof document === "undefined" });
`;

const PAGE = `<!doctype html><html><body><script>
const worker = new Worker("/sandbox.js", { type: "module" });
let seq = 0;
const waits = new Map();
globalThis.sandboxReady = new Promise((resolve) => {
  worker.onmessage = ({ data }) => {
    if ("ready" in data) resolve(data.ready);
    else waits.get(data.done)?.();
  };
});
globalThis.toSandbox = (message) => new Promise((resolve) => {
  const n = ++seq;
  waits.set(n, resolve);
  worker.postMessage({ ...message, seq: n });
});
</script></body></html>`;

const consent = (analytics: boolean) => ({
  analyticsProcessingAllowed: analytics,
  marketingAllowed: false,
  preferencesProcessingAllowed: false,
  saleOfDataAllowed: false,
});

async function withStorefront(
  fn: (ctx: TestContext, tab: import("playwright-core").Page, posts: () => number) => Promise<void>,
) {
  const script = await bundleForBrowser(ENTRY);
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    let posts = 0;
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
      const path = new URL(req.url).pathname;
      const js = { "content-type": "text/javascript" };
      if (path === "/") return new Response(PAGE, { headers: { "content-type": "text/html" } });
      if (path === "/sandbox.js") return new Response(SANDBOX, { headers: js });
      if (path === "/pixel.js") return new Response(script, { headers: js });
      if (path === "/cdp/ingest/shopify") posts++;
      return ctx.app.fetch(req);
    });
    const origin = `http://127.0.0.1:${server.addr.port}`;
    // The harness stands in for the shop's storefront: its origin is one of the shop's.
    await ctx.sql`update integrations set storefront_origins = array[${origin}]
                  where brand_id = ${brand.brandId}`;
    const running = forwarder(ctx);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
    });
    try {
      const tab = await browser.newPage();
      await tab.goto(`${origin}/`);
      assert.equal(await tab.evaluate("globalThis.sandboxReady"), true);
      await tab.evaluate((message) =>
        // deno-lint-ignore no-explicit-any
        (globalThis as any).toSandbox(message), {
        type: "render",
        settings: { serviceUrl: origin },
        init: {
          context: fixture.samples[0]!.event.context,
          data: {
            shop: { myshopifyDomain: brand.scope, name: "Acme" },
            customer: null,
            cart: null,
          },
          customerPrivacy: consent(true),
        },
      });
      await fn(ctx, tab, () => posts);
    } finally {
      await browser.close();
      await server.shutdown();
      ctx.kv.close();
      await running;
    }
  }, ENV);
}

// deno-lint-ignore no-explicit-any
const publish = (tab: import("playwright-core").Page, message: any) =>
  // deno-lint-ignore no-explicit-any
  tab.evaluate((m) => (globalThis as any).toSandbox(m), message);

const eventCount = async (ctx: TestContext) =>
  (await ctx.sql`select count(*)::int as n from events`)[0]!.n as number;

Deno.test({
  name: "browser: the extension sends Shopify's sample events; a signed order merges the visitor",
  ignore: !installed,
  async fn() {
    await withStorefront(async (ctx, tab, posts) => {
      for (const { event } of fixture.samples) await publish(tab, { type: "event", event });
      await eventually(async () => (await eventCount(ctx)) === 13);
      const types = (await ctx.sql`
        select event_type from events where profile_id = ${VISITOR} order by time_stamp`)
        .map((r) => r.event_type);
      assert.deepEqual(types, fixture.samples.map((s) => s.event.name));
      // Batched: fewer requests than events.
      assert.ok(posts() < 13, `${posts()} requests`);
      const [page] = await ctx.sql`
        select properties from events where event_type = 'page_viewed'`;
      assert.equal(page!.properties.context.page.path, "/");
      assert.equal(page!.properties.context.library.name, "shopify-web-pixel");
      // The checkout's email went only into the claim.
      assert.equal(
        (await ctx.sql`select count(*)::int as n from events where properties::text ilike '%@%'`)[
          0
        ]!
          .n,
        0,
      );
      const [brand] = await ctx.sql`select shop_domain from integrations`;
      await orderWebhook(ctx, brand!.shop_domain);
      await eventually(async () =>
        (await ctx.sql`select status from pixel_claims`)[0]?.status === "merged"
      );
      const [merged] = await ctx.sql`
        select p.provenance, p.nb_of_visits from profile_aliases a
        join profiles p on p.scope = a.scope and p.item_id = a.profile_id
        where a.alias_id = ${VISITOR}`;
      assert.equal(merged!.provenance, "merged");
      assert.ok(merged!.nb_of_visits >= 1);
    });
  },
});

Deno.test({
  name: "browser: consent withdrawn on the page stops the pixel; nothing is sent without it",
  ignore: !installed,
  async fn() {
    await withStorefront(async (ctx, tab, posts) => {
      const [first, second, third] = fixture.samples.map((s) => s.event);
      await publish(tab, { type: "event", event: first });
      await eventually(async () => (await eventCount(ctx)) === 1);
      await publish(tab, { type: "consent", customerPrivacy: consent(false) });
      await publish(tab, { type: "event", event: second });
      await publish(tab, { type: "event", event: third });
      // Given the pixel's own flush delay several times over: still one request, one event.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      assert.equal(posts(), 1);
      assert.equal(await eventCount(ctx), 1);
      await publish(tab, { type: "consent", customerPrivacy: consent(true) });
      await publish(tab, { type: "event", event: third });
      await eventually(async () => (await eventCount(ctx)) === 2);
      const types = (await ctx.sql`select event_type from events order by time_stamp`)
        .map((r) => r.event_type);
      assert.deepEqual(types, [first!.name, third!.name]);
    });
  },
});
