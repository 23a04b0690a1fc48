/**
 * analytics.js (`@segment/analytics-next`), unchanged, in headless Chromium (Debian's
 * `chromium`): loaded with only `cdnURL` set to the service, it reads the settings document and
 * posts to `/v1/*` with the writeKey in a text/plain body. Skipped where /usr/bin/chromium is
 * missing.
 */
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { startForwarder } from "../../lib/ingest/forwarder.ts";
import { bundleForBrowser, eventually, withContext } from "../test_support.ts";

const CHROMIUM = "/usr/bin/chromium";
const installed = await Deno.stat(CHROMIUM).then(() => true, () => false);
const ENTRY = new URL("../fixtures/segment/analytics_browser_entry.ts", import.meta.url).pathname;

Deno.test({
  name: "browser: analytics.js with cdnURL = the service delivers identify, track and page; " +
    "the session carries the page's referrer, campaign and user agent",
  ignore: !installed,
  async fn() {
    const script = await bundleForBrowser(ENTRY);
    await withContext(async (ctx) => {
      const brand = await ctx.seedBrand();
      const page = `<!doctype html><html><head><script src="/analytics.js"></script></head>` +
        `<body>test</body></html>`;
      const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
        const path = new URL(req.url).pathname;
        if (path === "/") return new Response(page, { headers: { "content-type": "text/html" } });
        if (path === "/analytics.js") {
          return new Response(script, { headers: { "content-type": "text/javascript" } });
        }
        return ctx.app.fetch(req);
      });
      const forwarder = startForwarder({
        queue: ctx.queue,
        engine: ctx.deps.engine,
        now: ctx.clock.now,
      });
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
      });
      try {
        const origin = `http://127.0.0.1:${server.addr.port}`;
        const tab = await browser.newPage();
        // A visit from a search result, on a campaign link.
        await tab.goto(`${origin}/?utm_source=news&utm_campaign=fall`, {
          referer: "https://www.google.com/",
        });
        await tab.evaluate(async ({ writeKey, cdnURL }) => {
          // deno-lint-ignore no-explicit-any
          const analytics = (globalThis as any).AnalyticsBrowser.load({ writeKey, cdnURL });
          await analytics.identify("ajs-user", { email: "ajs@example.com" });
          await analytics.track("Product Viewed", { product_id: "p-9" });
          await analytics.page("Home");
        }, { writeKey: brand.key, cdnURL: origin });
        await eventually(async () =>
          (await ctx.sql`select count(*)::int as n from events`)[0]!.n === 3
        );
        const profile = await (await ctx.request("/cdp/profiles/ajs-user", brand.key)).json();
        assert.ok(JSON.stringify(profile).includes("ajs@example.com"), JSON.stringify(profile));
        const events = JSON.stringify(
          await (await ctx.request("/cdp/profiles/ajs-user/events", brand.key)).json(),
        );
        for (const type of ["updateProperties", "product_viewed", "page_viewed"]) {
          assert.ok(events.includes(type), `${type}: ${events}`);
        }
        // One session, carrying the context analytics.js sent with its first event.
        const sessions = await (await ctx.request("/cdp/profiles/ajs-user/sessions", brand.key))
          .json();
        assert.equal(sessions.list.length, 1, JSON.stringify(sessions));
        const session = sessions.list[0].properties;
        assert.equal(session.referringURL, "https://www.google.com/", JSON.stringify(session));
        assert.equal(session.landingPageURL, `${origin}/?utm_source=news&utm_campaign=fall`);
        assert.equal(session.landingPagePath, "/");
        assert.equal(session.utmSource, "news");
        assert.equal(session.utmCampaign, "fall");
        assert.match(session.userAgentName, /Chrome/);
        assert.equal(session.operatingSystemName, "Linux");
        assert.equal(session.deviceCategory, "desktop");
      } finally {
        await browser.close();
        await server.shutdown();
        ctx.kv.close();
        await forwarder;
      }
    });
  },
});
