import assert from "node:assert/strict";
import { startDeliveryLoop } from "../../../lib/audiences/delivery_loop.ts";
import { eventually, withContext } from "../../test_support.ts";
import { startReceiver } from "./webhook_receiver.ts";
import { defineDestination, defineSegments, deliveryDeps, logChanges } from "./delivery_fixture.ts";

Deno.test("startDeliveryLoop: delivers new changes on its own, survives a failing pass, stops", async () => {
  const receiver = await startReceiver();
  try {
    await withContext(async (ctx) => {
      const brand = await ctx.seedBrand();
      const scope = brand.scope!;
      const deps = deliveryDeps(ctx.sql, ctx.kv, { pollMs: 20 });
      const [vip] = await defineSegments(ctx.sql, scope, ["VIP"]);
      const dest = await defineDestination(deps, { ...brand, scope }, [vip!], receiver.url);
      receiver.secret = dest.secret;
      let failing = true;
      const loop = startDeliveryLoop({
        ...deps,
        // The first passes find the database "down".
        sql: new Proxy(ctx.sql, {
          apply(target, self, args) {
            if (failing) return Promise.reject(new Error("connection refused"));
            return Reflect.apply(target, self, args);
          },
        }),
      });
      try {
        await logChanges(ctx.sql, scope, vip!, ["+p1"]);
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.equal(receiver.received.length, 0);
        failing = false;
        await eventually(() => receiver.accepted().length === 1);
        await logChanges(ctx.sql, scope, vip!, ["-p1"]);
        await eventually(() => receiver.accepted().length === 2);
      } finally {
        await loop.stop();
      }
      await logChanges(ctx.sql, scope, vip!, ["+p2"]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(receiver.accepted().length, 2, "nothing after stop");
      assert.ok(receiver.received.every((r) => r.verified));
    });
  } finally {
    await receiver.close();
  }
});
