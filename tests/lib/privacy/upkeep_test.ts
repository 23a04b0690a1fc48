import assert from "node:assert/strict";
import type { Tx } from "../../../lib/store/db.ts";
import { lazyIdentifierHasher } from "../../../lib/privacy/identifiers.ts";
import { getRequest, recordRequest } from "../../../lib/privacy/requests.ts";
import { setEventRetention } from "../../../lib/privacy/retention.ts";
import { privacyUpkeep } from "../../../lib/privacy/upkeep.ts";
import { eventually, withContext } from "../../test_support.ts";
import { sendEvents, startPrivacyForwarder } from "./privacy_support.ts";

Deno.test("privacy upkeep: a request whose message was lost is queued again and completes; retention is enforced", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    await sendEvents(ctx, a.key, [
      { eventType: "page_viewed", profileId: "old", timeStamp: "2026-01-01T00:00:00Z" },
      { eventType: "page_viewed", profileId: "new" },
    ]);
    // Recorded in a transaction of its own and never queued (as when the queue commit failed).
    const hasher = await lazyIdentifierHasher(ctx.kv, undefined)();
    const id = await ctx.sql.begin((tx) =>
      recordRequest(tx as unknown as Tx, { now: ctx.clock.now, newId: ctx.deps.newId, hasher }, {
        brandId: a.brandId,
        scope: a.scope!,
        type: "erase",
        identifier: "new",
        requestedBy: "test",
      })
    );
    await setEventRetention(ctx.sql, a.brandId, 30);
    void startPrivacyForwarder(ctx);
    const deps = { sql: ctx.sql, queue: ctx.queue, now: ctx.clock.now };
    // Within its first minute the request is left to its own message.
    await privacyUpkeep(deps);
    assert.equal((await getRequest(ctx.sql, a.brandId, id))!.status, "pending");
    const events = async () =>
      (await ctx.sql<{ n: number }[]>`
        select count(*)::int as n from events where scope = ${a.scope}`)[0]!.n;
    // Retention enforced at once: the event of January is gone.
    assert.equal(await events(), 1);
    ctx.clock.advance(61_000);
    await privacyUpkeep(deps);
    await eventually(async () =>
      (await getRequest(ctx.sql, a.brandId, id))!.status === "completed"
    );
    assert.equal(await events(), 0);
  });
});
