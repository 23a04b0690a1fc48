import assert from "node:assert/strict";
import { deliverDue } from "../../../lib/audiences/delivery.ts";
import { withContext } from "../../test_support.ts";
import { startReceiver } from "../../lib/audiences/webhook_receiver.ts";
import {
  defineDestination,
  defineSegments,
  deliveryDeps,
  logChanges,
} from "../../lib/audiences/delivery_fixture.ts";
import { APP_ENV, openDashboard } from "./dashboard_fixture.ts";
import { tableRows } from "./page_html.ts";

Deno.test("destinations page: each destination's health as the deliveries API shows it; brands apart", async () => {
  const receiver = await startReceiver();
  try {
    await withContext(async (ctx) => {
      const a = await ctx.seedBrand({ name: "Acme" });
      const b = await ctx.seedBrand({ name: "Other" });
      const deps = deliveryDeps(ctx.sql, ctx.kv, { retryMs: 1 });
      const [vip] = await defineSegments(ctx.sql, a.scope!, ["VIP"]);
      const dest = await defineDestination(deps, { ...a, scope: a.scope! }, [vip!], receiver.url);
      receiver.secret = dest.secret;
      await logChanges(ctx.sql, a.scope!, vip!, ["+p1"]);
      await deliverDue(deps);
      receiver.respond = 503;
      await logChanges(ctx.sql, a.scope!, vip!, ["+p2"]);
      await deliverDue(deps);
      await logChanges(ctx.sql, a.scope!, vip!, ["+p3", "+p4"]);

      const s = await openDashboard(ctx, a.scope!);
      const res = await ctx.app.request(`/app/destinations?s=${encodeURIComponent(s)}`);
      assert.equal(res.status, 200);
      const html = await res.text();
      const api = await (await ctx.request(`/cdp/destinations/${dest.id}/deliveries`, a.key))
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
        await (await ctx.app.request(`/app/destinations?s=${encodeURIComponent(other)}`))
          .text();
      assert.deepEqual(tableRows(otherHtml, "destinations"), []);
      assert.ok(!otherHtml.includes(receiver.url));
    }, APP_ENV);
  } finally {
    await receiver.close();
  }
});
