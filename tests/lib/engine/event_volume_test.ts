import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { eventVolumeByDay } from "../../../lib/engine/event_volume.ts";
import { withContext } from "../../test_support.ts";

const newId = monotonicFactory();

Deno.test("event volume: events per UTC day over the window, every day listed, one scope only", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    const at = (iso: string, type = "page_viewed") => ({
      id: newId(),
      eventType: type,
      profileId: "p1",
      timeStamp: iso,
    });
    await ctx.deps.engine.applyEvents({
      scope: a.scope!,
      source: "server",
      receivedAt: ctx.clock.now().toISOString(),
      events: [
        at("2026-11-21T00:00:00Z"),
        at("2026-11-21T11:59:00Z", "product_viewed"),
        at("2026-11-20T23:59:59Z"),
        at("2026-11-19T12:00:00Z", "cart_viewed"),
        at("2026-11-17T23:59:59.999Z"),
        at("2026-11-16T12:00:00Z"),
      ],
    });
    await ctx.deps.engine.applyEvents({
      scope: b.scope!,
      source: "server",
      receivedAt: ctx.clock.now().toISOString(),
      events: [at("2026-11-21T01:00:00Z")],
    });
    const days = await eventVolumeByDay(ctx.sql, a.scope!, { now: ctx.clock.now(), days: 5 });
    assert.deepEqual(days, [
      { day: "2026-11-17", events: 1 },
      { day: "2026-11-18", events: 0 },
      { day: "2026-11-19", events: 1 },
      { day: "2026-11-20", events: 1 },
      { day: "2026-11-21", events: 2 },
    ]);
    const none = await eventVolumeByDay(ctx.sql, "nobody.myshopify.com", {
      now: ctx.clock.now(),
      days: 2,
    });
    assert.deepEqual(none, [{ day: "2026-11-20", events: 0 }, { day: "2026-11-21", events: 0 }]);
  });
});
