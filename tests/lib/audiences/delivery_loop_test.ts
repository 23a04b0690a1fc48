import assert from "node:assert/strict";
import { startDeliveryLoop } from "../../../lib/audiences/delivery_loop.ts";
import { eventually } from "../../test_support.ts";
import { logChanges, withDestination } from "./delivery_fixture.ts";

Deno.test("startDeliveryLoop: delivers new changes on its own, survives a failing pass, stops", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, receiver }) => {
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
      await logChanges(ctx.sql, brand.scope, segment, ["+p1"]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(receiver.received.length, 0);
      failing = false;
      await eventually(() => receiver.accepted().length === 1);
      await logChanges(ctx.sql, brand.scope, segment, ["-p1"]);
      await eventually(() => receiver.accepted().length === 2);
    } finally {
      await loop.stop();
    }
    await logChanges(ctx.sql, brand.scope, segment, ["+p2"]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(receiver.accepted().length, 2, "nothing after stop");
    assert.ok(receiver.received.every((r) => r.verified));
  }, { pollMs: 20 });
});
