/**
 * The dashboard in a real browser: headless Chromium (Debian's `chromium`, installed by CI)
 * opens the app as the Shopify admin would, then the insights and customer pages; every chart
 * must be visible and drawn with marks, and each page is saved as a screenshot under
 * data/screenshots/ (not committed). Skipped where /usr/bin/chromium is missing.
 */
import assert from "node:assert/strict";
import { chromium, type Page } from "playwright-core";
import { withContext } from "../../test_support.ts";
import { APP_ENV, seedDashboard, sessionToken } from "./dashboard_fixture.ts";

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOTS = new URL("../../../data/screenshots/", import.meta.url).pathname;
const installed = await Deno.stat(CHROMIUM).then(() => true, () => false);

Deno.test({
  name: "browser: the insights and customer pages show every chart, drawn and visible",
  ignore: !installed,
  async fn() {
    await withContext(async (ctx) => {
      const { a } = await seedDashboard(ctx);
      const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, ctx.app.fetch);
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--no-first-run",
        ],
      });
      try {
        await Deno.mkdir(SCREENSHOTS, { recursive: true });
        const origin = `http://127.0.0.1:${server.addr.port}`;
        const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
        const token = await sessionToken(ctx, a.scope!);
        const entry = await page.goto(`${origin}/app?shop=${a.scope}&id_token=${token}`);
        assert.equal(entry?.status(), 200);
        assert.equal(new URL(page.url()).pathname, "/app/insights");

        const insights = await chartsOnPage(page);
        assert.deepEqual(
          insights.map((c) => c.id),
          ["ltv", "rfm", "products", "revenue", "events"],
        );
        for (const chart of insights) assertDrawn(chart);
        await page.screenshot({ path: `${SCREENSHOTS}insights.png`, fullPage: true });

        // The first at-risk customer's link opens the customer record.
        await page.locator('[data-table="at-risk"] tbody a').first().click();
        await page.waitForURL(/\/app\/customers\//);
        assert.match(await page.locator("h1").innerText(), /\S/);
        const customer = await chartsOnPage(page);
        assert.deepEqual(customer.map((c) => c.id), ["orders", "top-products"]);
        for (const chart of customer) assertDrawn(chart);
        await page.screenshot({ path: `${SCREENSHOTS}customer.png`, fullPage: true });
      } finally {
        await browser.close();
        await server.shutdown();
      }
    }, APP_ENV);
  },
});

interface DrawnChart {
  id: string;
  width: number;
  height: number;
  /** Marks (paths and rects) the browser lays out with a non-zero size. */
  marks: number;
}

/** The DOM members the measurement uses (Deno's type library has no DOM). */
interface _Node {
  querySelector(selector: string): _Node | null;
  querySelectorAll(selector: string): Iterable<_Node>;
  getAttribute(name: string): string | null;
  getBoundingClientRect(): { width: number; height: number };
  getBBox(): { width: number; height: number };
}

/** Every chart of the page, measured as laid out by the browser. */
async function chartsOnPage(page: Page): Promise<DrawnChart[]> {
  return await page.$$eval("[data-chart]", (cards) =>
    (cards as unknown as _Node[]).map((card) => {
      const svg = card.querySelector("figure svg");
      const box = svg?.getBoundingClientRect();
      const marks = svg
        ? [...svg.querySelectorAll("path, rect")].filter((mark) => {
          const r = mark.getBBox();
          const fill = mark.getAttribute("fill");
          return r.width > 0 && r.height > 0 && fill !== "none" && fill !== "transparent";
        }).length
        : 0;
      return {
        id: card.getAttribute("data-chart")!,
        width: box?.width ?? 0,
        height: box?.height ?? 0,
        marks,
      };
    }));
}

function assertDrawn(chart: DrawnChart): void {
  assert.ok(chart.width > 100 && chart.height > 100, `${chart.id}: ${JSON.stringify(chart)}`);
  assert.ok(chart.marks > 0, `${chart.id} draws nothing`);
}
