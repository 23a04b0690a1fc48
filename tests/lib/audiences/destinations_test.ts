import assert from "node:assert/strict";
import { deliverDue } from "../../../lib/audiences/delivery.ts";
import {
  getDestination,
  listDestinations,
  rotateSigningSecret,
  updateDestination,
} from "../../../lib/audiences/destinations.ts";
import { withContext } from "../../test_support.ts";
import {
  defineDestination,
  defineSegments,
  deliveryDeps,
  logChanges,
  withDestination,
} from "./delivery_fixture.ts";
import { documentedVerifier } from "./webhook_receiver.ts";

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

Deno.test("rotateSigningSecret: both secrets sign during the overlap, the new one alone after it; 0 stops the old at once", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    const verify = await documentedVerifier();
    const deliver = async (profile: string) => {
      await logChanges(ctx.sql, brand.scope, segment, [`+${profile}`]);
      assert.equal(await deliverDue(deps), 1);
      return receiver.received.at(-1)!;
    };
    const signs = async (secret: string, got: { body: string; signature: string }) =>
      await verify(secret, got.body, got.signature);

    const rotated = (await rotateSigningSecret(deps, brand.scope, destination.id, 3600))!;
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.secret, destination.secret);
    const expires = Date.parse(rotated.previousSecretExpiresAt!) - Date.now();
    assert.ok(expires > 3_500_000 && expires <= 3_600_000, String(expires));
    // Both sealed at rest.
    const [row] = await ctx.sql<{ secret: string; previous_secret: string }[]>`
      select secret, previous_secret from destinations where id = ${destination.id}`;
    assert.match(row!.secret, /^v1\./);
    assert.match(row!.previous_secret, /^v1\./);
    assert.equal(await deps.cipher.decrypt(row!.previous_secret), destination.secret);

    // During the overlap a receiver on either secret accepts, the new one's v1 first.
    const during = await deliver("p1");
    assert.equal(during.signature.split(",").length, 3);
    assert.ok(await signs(destination.secret, during));
    assert.ok(await signs(rotated.secret, during));
    assert.equal(during.verified, true, "the receiver, still on the old secret");

    // A second rotation drops the oldest secret: the one it replaces keeps signing.
    const again = (await rotateSigningSecret(deps, brand.scope, destination.id, 60))!;
    const next = await deliver("p2");
    assert.ok(await signs(again.secret, next));
    assert.ok(await signs(rotated.secret, next));
    assert.equal(await signs(destination.secret, next), false);

    // Past the overlap, only the current secret signs.
    await ctx.sql`
      update destinations set previous_secret_expires_at = now() - interval '1 second'
      where id = ${destination.id}`;
    const after = await deliver("p3");
    assert.equal(after.signature.split(",").length, 2);
    assert.ok(await signs(again.secret, after));
    assert.equal(await signs(rotated.secret, after), false);

    // No overlap: the replaced secret stops at once.
    const now = (await rotateSigningSecret(deps, brand.scope, destination.id, 0))!;
    assert.equal(now.previousSecretExpiresAt, null);
    const last = await deliver("p4");
    assert.ok(await signs(now.secret, last));
    assert.equal(await signs(again.secret, last), false);
    // Another brand's destination, like a missing one, is not rotated.
    assert.equal(await rotateSigningSecret(deps, "other.myshopify.com", destination.id, 60), null);
    assert.equal(await rotateSigningSecret(deps, brand.scope, "dst_missing", 60), null);
  });
});
