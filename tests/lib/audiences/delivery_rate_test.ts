import assert from "node:assert/strict";
import { takeDeliverySlot } from "../../../lib/audiences/delivery_rate.ts";
import { withKv } from "../../test_support.ts";

Deno.test("takeDeliverySlot: a brand's minute holds the cap, brands and minutes apart", async () => {
  await withKv(async (kv) => {
    const t = new Date("2026-11-26T10:00:10Z");
    const taken = await Promise.all(
      Array.from({ length: 5 }, () => takeDeliverySlot(kv, "brand-a", t, 3)),
    );
    assert.ok(taken.filter(Boolean).length <= 3);
    while (await takeDeliverySlot(kv, "brand-a", t, 3)) { /* fill the minute */ }
    assert.equal(await takeDeliverySlot(kv, "brand-a", new Date("2026-11-26T10:00:59Z"), 3), false);
    assert.equal(await takeDeliverySlot(kv, "brand-b", t, 3), true);
    assert.equal(await takeDeliverySlot(kv, "brand-a", new Date("2026-11-26T10:01:00Z"), 3), true);
  });
});
