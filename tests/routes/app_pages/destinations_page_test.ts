import assert from "node:assert/strict";
import { deliverDue } from "../../../lib/audiences/delivery.ts";
import { logChanges, withDestination } from "../../lib/audiences/delivery_fixture.ts";
import { APP_ENV, openDashboard } from "./dashboard_fixture.ts";
import { tableRows } from "./page_html.ts";

Deno.test("destinations page: each destination's health as the deliveries API shows it; brands apart", async () => {
  await withDestination(
    async ({ ctx, deps, brand, segment, destination, receiver }) => {
      const b = await ctx.seedBrand({ name: "Other" });
      await logChanges(ctx.sql, brand.scope, segment, ["+p1"]);
      await deliverDue(deps);
      receiver.respond = 503;
      await logChanges(ctx.sql, brand.scope, segment, ["+p2"]);
      await deliverDue(deps);
      await logChanges(ctx.sql, brand.scope, segment, ["+p3", "+p4"]);

      const s = await openDashboard(ctx, brand.scope);
      const res = await ctx.app.request(`/app/destinations?s=${encodeURIComponent(s)}`);
      assert.equal(res.status, 200);
      const html = await res.text();
      const api =
        await (await ctx.request(`/cdp/destinations/${destination.id}/deliveries`, brand.key))
          .json();
      const dead = api.list.filter((d: { status: string }) => d.status === "dead").length;
      const delivered = api.list.filter((d: { status: string }) => d.status === "delivered");
      const [row] = tableRows(html, "destinations");
      assert.deepEqual(row!.slice(0, 7), ["Hook", receiver.url, "1", "1", "0", String(dead), "2"]);
      assert.equal(row![7], delivered[0].completedAt);
      assert.equal(row![8], "HTTP 503");
      assert.match(html, /data-notice="failing"/);

      const other = await openDashboard(ctx, b.scope!);
      const otherHtml =
        await (await ctx.app.request(`/app/destinations?s=${encodeURIComponent(other)}`)).text();
      assert.deepEqual(tableRows(otherHtml, "destinations"), []);
      assert.ok(!otherHtml.includes(receiver.url));
    },
    { retryMs: 1 },
    APP_ENV,
  );
});
