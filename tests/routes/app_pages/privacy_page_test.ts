import assert from "node:assert/strict";
import { type TestContext, withContext } from "../../test_support.ts";
import { privacyJob, sendEvents } from "../../lib/privacy/privacy_support.ts";
import { APP_ENV, openDashboard } from "./dashboard_fixture.ts";
import { tableRows } from "./page_html.ts";

const page = (ctx: TestContext, path: string, s: string) =>
  ctx.app.request(`${path}${path.includes("?") ? "&" : "?"}s=${encodeURIComponent(s)}`);

Deno.test("dashboard: /app/privacy lists the brand's requests and downloads a completed export", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    await sendEvents(ctx, a.key, [{ eventType: "page_viewed", profileId: "bob" }]);
    const ask = async (type: string, identifier: string) => {
      const res = await ctx.request("/cdp/privacy/requests", a.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ type, identifier }),
      });
      return (await res.json()).id as string;
    };
    const exported = await ask("export", "bob");
    await privacyJob(ctx)({ kind: "privacy_request", brandId: a.brandId, requestId: exported });
    ctx.clock.advance(1_000);
    await ask("suppress", "carol@example.com");
    const s = await openDashboard(ctx, a.scope!);
    const res = await page(ctx, "/app/privacy", s);
    assert.equal(res.status, 200);
    const html = await res.text();
    const rows = tableRows(html, "privacy");
    assert.equal(rows.length, 2);
    assert.deepEqual(rows.map((row) => [row[1], row[2], row[4]]), [
      ["suppress", "carol@example.com", "pending"],
      ["export", "bob", "completed"],
    ]);
    assert.match(rows[1]![7]!, /Download/);
    assert.match(html, new RegExp(`/app/privacy/${exported}/download\\?s=`));
    const download = await page(ctx, `/app/privacy/${exported}/download`, s);
    assert.equal(download.status, 200);
    assert.match(download.headers.get("content-disposition")!, /attachment/);
    const doc = await download.json();
    assert.equal(doc.profiles[0].id, "bob");
    assert.equal(doc.events.length, 1);
    // Another brand's dashboard sees none of it.
    const other = await openDashboard(ctx, b.scope!);
    assert.equal(
      tableRows(await (await page(ctx, "/app/privacy", other)).text(), "privacy").length,
      0,
    );
    const foreign = await page(ctx, `/app/privacy/${exported}/download`, other);
    assert.equal(foreign.status, 404);
    await foreign.body?.cancel();
  }, APP_ENV);
});
