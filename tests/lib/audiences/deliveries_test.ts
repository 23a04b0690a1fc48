import assert from "node:assert/strict";
import { deliverDue } from "../../../lib/audiences/delivery.ts";
import {
  destinationsHealth,
  recentDeliveries,
  replayDeliveries,
} from "../../../lib/audiences/deliveries.ts";
import { logChanges, withDestination } from "./delivery_fixture.ts";

Deno.test("deliveries: recent first with status and errors; health counts; replay only dead ones", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    await logChanges(ctx.sql, brand.scope, segment, ["+p1"]);
    await deliverDue(deps);
    receiver.respond = 502;
    await logChanges(ctx.sql, brand.scope, segment, ["+p2", "+p3"]);
    await deliverDue(deps); // one attempt, past the (1 ms) window: dead
    await logChanges(ctx.sql, brand.scope, segment, ["+p4"]);

    const page = await recentDeliveries(ctx.sql, destination.id, { limit: 10, offset: 0 });
    assert.equal(page.total, 2);
    assert.deepEqual(
      page.list.map((d) => [d.status, d.count, d.attempts, d.lastStatus, d.lastError]),
      [["dead", 2, 1, 502, "HTTP 502"], ["delivered", 1, 1, 200, null]],
    );
    assert.equal(page.list[0]!.nextAttemptAt, null);
    const dead = await recentDeliveries(ctx.sql, destination.id, {
      limit: 10,
      offset: 0,
      status: "dead",
    });
    assert.deepEqual(dead.list.map((d) => d.id), [page.list[0]!.id]);

    const [health] = await destinationsHealth(ctx.sql, brand.scope, new Date());
    assert.deepEqual(
      [health!.pending, health!.dead, health!.delivered24h, health!.backlog, health!.lastError],
      [0, 1, 1, 1, "HTTP 502"],
    );
    assert.ok(health!.lastDeliveredAt);
    assert.deepEqual(await destinationsHealth(ctx.sql, "other.myshopify.com", new Date()), []);

    assert.deepEqual(
      await replayDeliveries(ctx.sql, { deliveryId: page.list[1]!.id }, new Date(), 60_000),
      [],
      "a delivered one is not replayed",
    );
    const replayed = await replayDeliveries(
      ctx.sql,
      { destinationId: destination.id },
      new Date(),
      60_000,
    );
    assert.deepEqual(replayed, [page.list[0]!.id]);
    const [after] = (await recentDeliveries(ctx.sql, destination.id, { limit: 1, offset: 0 }))
      .list;
    assert.equal(after!.status, "pending");
    assert.ok(after!.nextAttemptAt);
  }, { retryMs: 1 });
});
