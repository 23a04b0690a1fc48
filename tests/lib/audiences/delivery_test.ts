import assert from "node:assert/strict";
import { deliverDestination, deliverDue } from "../../../lib/audiences/delivery.ts";
import { replayDeliveries } from "../../../lib/audiences/deliveries.ts";
import { updateDestination } from "../../../lib/audiences/destinations.ts";
import { eventually, withContext } from "../../test_support.ts";
import { documentedVerifier, startReceiver } from "./webhook_receiver.ts";
import {
  defineDestination,
  defineSegments,
  deliveryDeps,
  logChanges,
  withDestination,
} from "./delivery_fixture.ts";

type Deliveries = { status: string; attempts: number; count: number; last_error: string | null }[];

Deno.test("delivery: changes arrive signed, batched by 100, in log order, each once", async () => {
  const receiver = await startReceiver();
  try {
    await withContext(async (ctx) => {
      const brand = await ctx.seedBrand();
      const scope = brand.scope!;
      const deps = deliveryDeps(ctx.sql, ctx.kv);
      const [vip, lapsed] = await defineSegments(ctx.sql, scope, ["VIP", "Lapsed"]);
      // Changes before the destination exists are not its.
      await logChanges(ctx.sql, scope, vip!, ["+early"]);
      const dest = await defineDestination(deps, { ...brand, scope }, [vip!], receiver.url);
      receiver.secret = dest.secret;
      const profiles = Array.from({ length: 230 }, (_, i) => `p${String(i).padStart(3, "0")}`);
      await logChanges(ctx.sql, scope, vip!, profiles.map((p) => `+${p}`));
      await logChanges(ctx.sql, scope, lapsed!, ["+p000"]); // not this destination's segment
      await logChanges(ctx.sql, scope, vip!, ["-p007"]);

      assert.equal(await deliverDue(deps), 3);
      assert.equal(await deliverDue(deps), 0);
      assert.deepEqual(receiver.received.map((r) => r.json.deliveries.length), [100, 100, 31]);
      assert.ok(receiver.received.every((r) => r.verified && r.json.destination === dest.id));
      assert.equal(new Set(receiver.received.map((r) => r.deliveryId)).size, 3);
      const got = receiver.accepted();
      assert.deepEqual(
        got.map((d) => `${d.type === "segment.entered" ? "+" : "-"}${d.profile.id}`),
        [...profiles.map((p) => `+${p}`), "-p007"],
      );
      const feed = await ctx.sql<{ id: string }[]>`
        select id from segment_changes where segment_id = ${vip!} and profile_id <> 'early'
        order by position`;
      assert.deepEqual(got.map((d) => d.id), feed.map((r) => r.id));
      assert.deepEqual(got[0]!.segment, { id: vip, name: "VIP" });
      const rows = await ctx.sql<Deliveries>`
        select status, attempts, count, last_error from destination_deliveries order by first_position`;
      assert.deepEqual(rows.map((r) => [r.status, r.attempts, r.count]), [
        ["delivered", 1, 100],
        ["delivered", 1, 100],
        ["delivered", 1, 31],
      ]);
    });
  } finally {
    await receiver.close();
  }
});

Deno.test("delivery: the profile's identity rides along; a tampered body fails the documented check", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    const scope = brand.scope;
    await ctx.deps.engine.applyEvents({
      scope,
      source: "server",
      receivedAt: new Date().toISOString(),
      events: [{
        id: ctx.deps.newId(),
        eventType: "updateProperties",
        profileId: "bob",
        properties: { update: { "properties.email": "bob@example.com", "properties.vip": 1 } },
      }],
    });
    await logChanges(ctx.sql, scope, segment, ["+bob", "+ghost"]);
    await deliverDue(deps);
    const [got] = receiver.received;
    assert.equal(got!.verified, true);
    const [bob, ghost] = got!.json.deliveries;
    assert.equal(bob!.profile.identity.email, "bob@example.com");
    assert.deepEqual(ghost!.profile, { id: "ghost", identity: {} });
    const verify = await documentedVerifier();
    assert.equal(
      await verify(destination.secret, got!.body.replace("bob@", "eve@"), got!.signature),
      false,
    );
    assert.equal(await verify(`${destination.secret}x`, got!.body, got!.signature), false);
    const stale = got!.signature.replace(/t=(\d+)/, (_, t) => `t=${Number(t) - 3600}`);
    assert.equal(await verify(destination.secret, got!.body, stale), false);
  });
});

Deno.test("delivery: a failing receiver is retried with the same ids, later ones wait, then all arrive in order", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, receiver }) => {
    const scope = brand.scope;
    receiver.respond = 500;
    await logChanges(ctx.sql, scope, segment, ["+p1", "+p2"]);
    for (let i = 0; i < 3; i++) {
      await deliverDue(deps);
      await new Promise((resolve) => setTimeout(resolve, 20 * 2 ** i + 10));
    }
    await logChanges(ctx.sql, scope, segment, ["-p1"]); // waits behind the failing delivery
    receiver.respond = "hang";
    await deliverDue(deps); // no answer within the timeout
    receiver.respond = 200;
    await eventually(async () => {
      await deliverDue(deps);
      return receiver.accepted().length === 3;
    });
    const first = receiver.received.filter((r) =>
      r.deliveryId === receiver.received[0]!.deliveryId
    );
    assert.ok(first.length >= 5, `attempts of the first delivery: ${first.length}`);
    assert.equal(new Set(first.map((r) => r.body)).size, 1, "a retry sends the same body");
    assert.ok(receiver.received.every((r) => r.verified));
    assert.deepEqual(
      receiver.accepted().map((d) => `${d.type}:${d.profile.id}`),
      ["segment.entered:p1", "segment.entered:p2", "segment.exited:p1"],
    );
    // Until the first succeeded, the exit was never sent.
    const firstOk = receiver.received.findIndex((r) => r.answered === 200);
    assert.ok(receiver.received.slice(0, firstOk).every((r) => r.json.deliveries.length === 2));
    const rows = await ctx.sql<Deliveries>`
    select status, attempts, count, last_error from destination_deliveries order by first_position`;
    assert.equal(rows[0]!.status, "delivered");
    assert.equal(rows[0]!.attempts, first.length);
    assert.equal(rows[1]!.status, "delivered");
  }, { backoffMs: 20 });
});

Deno.test("delivery: past the retry window a delivery is dead, the next goes, and a replay sends it again", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    const scope = brand.scope;
    receiver.respond = 410;
    await logChanges(ctx.sql, scope, segment, ["+p1"]);
    await eventually(async () => {
      await deliverDue(deps);
      const [row] = await ctx.sql`select status from destination_deliveries`;
      return row?.status === "dead";
    });
    receiver.respond = 200;
    await logChanges(ctx.sql, scope, segment, ["+p2"]);
    await eventually(async () => (await deliverDue(deps), receiver.accepted().length === 1));
    assert.equal(receiver.accepted()[0]!.profile.id, "p2");
    const [dead] = await ctx.sql<{ id: string; last_error: string }[]>`
      select id, last_error from destination_deliveries where status = 'dead'`;
    assert.equal(dead!.last_error, "HTTP 410");

    assert.deepEqual(
      await replayDeliveries(ctx.sql, { destinationId: destination.id }, new Date(), 60_000),
      [dead!.id],
    );
    await deliverDue(deps);
    assert.deepEqual(receiver.accepted().map((d) => d.profile.id), ["p2", "p1"]);
    assert.equal(receiver.received.at(-1)!.deliveryId, dead!.id);
    const [replayed] = await ctx.sql`select status from destination_deliveries where id = ${
      dead!.id
    }`;
    assert.equal(replayed!.status, "delivered");
    assert.deepEqual(
      await replayDeliveries(ctx.sql, { destinationId: destination.id }, new Date(), 1),
      [],
    );
  }, { backoffMs: 10, retryMs: 150 });
});

Deno.test("delivery: redirects are not followed; a private address is refused at delivery time", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    const scope = brand.scope;
    receiver.respond = 307;
    await logChanges(ctx.sql, scope, segment, ["+p1"]);
    await deliverDue(deps);
    const [row] = await ctx.sql<Deliveries>`select status, attempts, count, last_error
      from destination_deliveries`;
    assert.deepEqual([row!.status, row!.last_error], [
      "pending",
      "HTTP 307 (redirects are not followed)",
    ]);
    assert.equal(receiver.received.length, 1);

    // Saved while private addresses were allowed; now they are not, and a name resolving
    // to loopback is refused before any connection.
    await ctx.sql`update destinations set url = 'https://hooks.example.test/x'`;
    const strict = {
      ...deliveryDeps(ctx.sql, ctx.kv, { allowPrivate: false }),
      resolve: () => Promise.resolve(["203.0.114.9", "127.0.0.1"]),
    };
    await ctx.sql`update destination_deliveries set next_attempt_at = now() - interval '1s'`;
    await deliverDestination(strict, destination.id);
    const [refused] = await ctx.sql<Deliveries>`select status, attempts, count, last_error
      from destination_deliveries`;
    assert.equal(
      refused!.last_error,
      "hooks.example.test resolves to 127.0.0.1, which is not a public address",
    );
    assert.equal(receiver.received.length, 1);
  });
});

Deno.test("delivery: brands stay apart; two processes never post one destination at once", async () => {
  const receiverA = await startReceiver();
  const receiverB = await startReceiver();
  try {
    await withContext(async (ctx) => {
      const a = await ctx.seedBrand();
      const b = await ctx.seedBrand();
      const depsA = deliveryDeps(ctx.sql, ctx.kv);
      const depsB = deliveryDeps(ctx.sql, ctx.kv);
      const [segA] = await defineSegments(ctx.sql, a.scope!, ["VIP"]);
      const [segB] = await defineSegments(ctx.sql, b.scope!, ["VIP"]);
      const destA = await defineDestination(
        depsA,
        { ...a, scope: a.scope! },
        [segA!],
        receiverA.url,
      );
      const destB = await defineDestination(
        depsB,
        { ...b, scope: b.scope! },
        [segB!],
        receiverB.url,
      );
      receiverA.secret = destA.secret;
      receiverB.secret = destB.secret;
      await logChanges(ctx.sql, a.scope!, segA!, ["+a1", "+a2"]);
      await logChanges(ctx.sql, b.scope!, segB!, ["+b1"]);
      // Two "processes" pass at once over the same database.
      await Promise.all([deliverDue(depsA), deliverDue(depsB), deliverDue(depsA)]);
      assert.deepEqual(receiverA.accepted().map((d) => d.profile.id), ["a1", "a2"]);
      assert.deepEqual(receiverB.accepted().map((d) => d.profile.id), ["b1"]);
      assert.equal(receiverA.received.length, 1);
      assert.equal(receiverB.received.length, 1);
      assert.ok([...receiverA.received, ...receiverB.received].every((r) => r.verified));
    });
  } finally {
    await receiverA.close();
    await receiverB.close();
  }
});

Deno.test("delivery: the brand's rate cap holds POSTs back until a later minute, dropping none", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, receiver }) => {
    let clock = Date.parse("2026-11-26T10:00:00Z");
    const pinned = { ...deps, now: () => new Date(clock) };
    await logChanges(
      ctx.sql,
      brand.scope,
      segment,
      Array.from({ length: 250 }, (_, i) => `+p${i}`),
    );
    assert.equal(await deliverDue(pinned), 2);
    assert.equal(await deliverDue(pinned), 0);
    clock += 60_000;
    assert.equal(await deliverDue(pinned), 1);
    assert.equal(receiver.accepted().length, 250);
  }, { ratePerMinute: 2 });
});

Deno.test("delivery: a destination requiring a consent type gets only the profiles with it granted", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    const scope = brand.scope;
    const consent = (profileId: string, status: string, revokeDate?: string) => ({
      id: ctx.deps.newId(),
      eventType: "modifyConsent",
      profileId,
      properties: {
        consent: {
          typeIdentifier: "marketing_email",
          status,
          statusDate: "2026-01-01T00:00:00Z",
          ...(revokeDate ? { revokeDate } : {}),
        },
      },
    });
    const results = await ctx.deps.engine.applyEvents({
      scope,
      source: "server",
      receivedAt: new Date().toISOString(),
      events: [
        consent("ann", "GRANTED"),
        consent("bob", "DENIED"),
        consent("dan", "GRANTED", "2026-02-01T00:00:00Z"), // granted, since revoked
      ],
    });
    assert.ok(results.every((r) => r.ok), JSON.stringify(results));
    const updated = await updateDestination(deps, scope, destination.id, {
      name: "Hook",
      url: receiver.url,
      segments: [segment],
      requiredConsent: "marketing_email",
    });
    assert.equal(updated?.requiredConsent, "marketing_email");
    // carl has no consents at all.
    await logChanges(ctx.sql, scope, segment, ["+ann", "+bob", "+carl", "+dan", "-ann"]);
    await deliverDue(deps);
    assert.deepEqual(
      receiver.accepted().map((d) => `${d.type} ${d.profile.id}`),
      ["segment.entered ann", "segment.exited ann"],
    );
    // Changes passed over stay passed over; bob's next change, once granted, is delivered.
    await ctx.deps.engine.applyEvents({
      scope,
      source: "server",
      receivedAt: new Date().toISOString(),
      events: [consent("bob", "GRANTED")],
    });
    await logChanges(ctx.sql, scope, segment, ["-bob"]);
    await deliverDue(deps);
    assert.deepEqual(
      receiver.accepted().map((d) => `${d.type} ${d.profile.id}`),
      ["segment.entered ann", "segment.exited ann", "segment.exited bob"],
    );
  });
});
