import assert from "node:assert/strict";
import {
  getDestination,
  listDestinations,
  updateDestination,
} from "../../../lib/audiences/destinations.ts";
import { withContext } from "../../test_support.ts";
import { defineDestination, defineSegments, deliveryDeps, logChanges } from "./delivery_fixture.ts";

Deno.test("destinations: a new one starts at the log's end; an update keeps its position and secret", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const scope = brand.scope!;
    const deps = deliveryDeps(ctx.sql, ctx.kv);
    const [vip, lapsed] = await defineSegments(ctx.sql, scope, ["VIP", "Lapsed"]);
    await logChanges(ctx.sql, scope, vip!, ["+p1", "+p2"]);
    const dest = await defineDestination(deps, { ...brand, scope }, [vip!], "https://h.example/x");
    const [row] = await ctx.sql<{ cursor: string; secret: string }[]>`
      select cursor, secret from destinations where id = ${dest.id}`;
    // Past every position of the feed's last row, so none of the changes before it.
    const [end] = await ctx.sql<{ position: string }[]>`
      select segment_feed_position(max(seq), 1024)::text as position from segment_feed`;
    assert.equal(row!.cursor, end!.position);
    const [seen] = await ctx.sql<{ n: number }[]>`
      select count(*)::int as n from segment_changes where position > ${row!.cursor}::bigint`;
    assert.equal(seen!.n, 0);
    // Sealed at rest (destination_secret_test.ts has the rest).
    assert.equal(await deps.cipher.decrypt(row!.secret), dest.secret);

    const updated = await updateDestination(deps, scope, dest.id, {
      name: "Both",
      url: "https://h.example/y",
      segments: [vip!, lapsed!],
    });
    assert.deepEqual(updated?.segments, [vip, lapsed]);
    const [after] = await ctx.sql<{ cursor: string; secret: string }[]>`
      select cursor, secret from destinations where id = ${dest.id}`;
    assert.deepEqual(after, row);
    // Another brand's: the same as missing.
    assert.equal(
      await updateDestination(deps, scope, "dst_missing", {
        name: "x",
        url: "https://h.example/",
        segments: [vip!],
      }),
      null,
    );
    await assert.rejects(
      updateDestination(deps, "other.myshopify.com", dest.id, {
        name: "x",
        url: "https://h.example/",
        segments: [vip!],
      }),
      /Segment not found/,
    );
    assert.equal(await getDestination(ctx.sql, "other.myshopify.com", dest.id), null);
    const page = await listDestinations(ctx.sql, scope, { limit: 1, offset: 1 });
    assert.deepEqual([page.list, page.total], [[], 1]);
  });
});
