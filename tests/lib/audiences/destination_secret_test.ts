import assert from "node:assert/strict";
import { deliverDue, sendTestDelivery } from "../../../lib/audiences/delivery.ts";
import { startDeliveryLoop } from "../../../lib/audiences/delivery_loop.ts";
import {
  openSigningSecret,
  openSigningSecrets,
  sealPlaintextSecrets,
  type StoredSecrets,
  UNREADABLE_SECRET_ERROR,
} from "../../../lib/audiences/destination_secret.ts";
import { rotateSigningSecret } from "../../../lib/audiences/destinations.ts";
import { signatureHeader } from "../../../lib/audiences/webhook_signature.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { withKv } from "../../test_support.ts";
import { defineDestination, logChanges, withDestination } from "./delivery_fixture.ts";
import { startReceiver } from "./webhook_receiver.ts";

async function stored(sql: Sql, id: string): Promise<string> {
  const [row] = await sql<{ secret: string }[]>`select secret from destinations where id = ${id}`;
  return row!.secret;
}

Deno.test("destination secret: the row holds it sealed, never the secret itself", async () => {
  await withDestination(async ({ ctx, deps, destination }) => {
    const column = await stored(ctx.sql, destination.id);
    assert.match(column, /^v1\./);
    assert.ok(!column.includes(destination.secret));
    assert.ok(!column.includes(destination.secret.slice("whsec_".length)));
    assert.equal(await deps.cipher.decrypt(column), destination.secret);
  });
});

Deno.test("destination secret: through the API too; /test signs with the secret shown once", async () => {
  await withDestination(
    async ({ ctx, brand, segment, receiver }) => {
      const res = await ctx.request("/cdp/destinations", brand.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          name: "API",
          type: "webhook",
          url: receiver.url,
          segments: [segment],
        }),
      });
      assert.equal(res.status, 201);
      const created = await res.json();
      const column = await stored(ctx.sql, created.id);
      assert.ok(column.startsWith("v1.") && !column.includes(created.secret));
      receiver.secret = created.secret;
      const tested = await ctx.request(`/cdp/destinations/${created.id}/test`, brand.key, {
        method: "POST",
      });
      assert.equal((await tested.json()).ok, true);
      // Signed at the app's pinned clock: checked against that time, with the secret shown once.
      const got = receiver.received.at(-1)!;
      const t = Number(got.signature.match(/^t=(\d+),/)![1]);
      assert.equal(
        got.signature,
        await signatureHeader(created.secret, got.body, new Date(t * 1000)),
      );
    },
    {},
    { DESTINATIONS_ALLOW_PRIVATE: "true" },
  );
});

Deno.test("destination secret: a plaintext row (written before sealing) signs, then is sealed", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    await ctx.sql`update destinations set secret = ${destination.secret}
      where id = ${destination.id}`;
    await logChanges(ctx.sql, brand.scope, segment, ["+p1"]);
    assert.equal(await deliverDue(deps), 1);
    assert.deepEqual(receiver.received.map((r) => r.verified), [true]);
    const column = await stored(ctx.sql, destination.id);
    assert.match(column, /^v1\./);
    assert.equal(await deps.cipher.decrypt(column), destination.secret);
    // Sealed once: opening it again leaves the row as it is.
    assert.deepEqual(await openSigningSecret(deps, { id: destination.id, secret: column }), {
      ok: true,
      secret: destination.secret,
    });
    assert.equal(await stored(ctx.sql, destination.id), column);
    await logChanges(ctx.sql, brand.scope, segment, ["+p2"]);
    assert.equal(await deliverDue(deps), 1);
    assert.deepEqual(receiver.received.map((r) => r.verified), [true, true]);
  });
});

Deno.test("destination secret: the delivery timer seals plaintext rows at its start, once", async () => {
  await withDestination(async ({ ctx, deps, destination }) => {
    await ctx.sql`update destinations set secret = ${destination.secret}
      where id = ${destination.id}`;
    const loop = startDeliveryLoop(deps);
    try {
      await loop.pass();
    } finally {
      await loop.stop();
    }
    const column = await stored(ctx.sql, destination.id);
    assert.match(column, /^v1\./);
    assert.equal(await deps.cipher.decrypt(column), destination.secret);
    assert.equal(await sealPlaintextSecrets(deps), 0);
    assert.equal(await stored(ctx.sql, destination.id), column);
  });
});

Deno.test("destination secret: sealed under another key, the delivery fails visibly and the pass goes on", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    await withKv(async (otherKv) => {
      const other = await openTokenCipher(otherKv, undefined);
      await ctx.sql`update destinations set secret = ${await other.encrypt(destination.secret)}
        where id = ${destination.id}`;
    });
    // Another destination of the same segment, whose secret opens, in the same pass.
    const fine = await startReceiver();
    try {
      fine.secret = (await defineDestination(deps, brand, [segment], fine.url)).secret;
      await logChanges(ctx.sql, brand.scope, segment, ["+p1"]);
      assert.equal(await deliverDue(deps), 1);
      assert.deepEqual(fine.received.map((r) => r.verified), [true]);
    } finally {
      await fine.close();
    }
    assert.equal(receiver.received.length, 0);
    const rows = await ctx.sql<{ status: string; attempts: number; last_error: string }[]>`
      select status, attempts, last_error from destination_deliveries
      where destination_id = ${destination.id}`;
    assert.deepEqual([...rows], [{
      status: "pending",
      attempts: 1,
      last_error: UNREADABLE_SECRET_ERROR,
    }]);
    const health = await ctx.request(`/cdp/destinations/${destination.id}/deliveries`, brand.key);
    assert.equal((await health.json()).list[0].lastError, UNREADABLE_SECRET_ERROR);
    const tested = await sendTestDelivery(deps, brand.scope, destination.id);
    assert.deepEqual([tested?.ok, tested?.status, tested?.error], [
      false,
      null,
      UNREADABLE_SECRET_ERROR,
    ]);
    assert.equal(receiver.received.length, 0);
  });
});

Deno.test("destination secret: a rotated-out secret that cannot be opened is left out; the current one still signs", async () => {
  await withDestination(async ({ ctx, deps, brand, destination }) => {
    await withKv(async (otherKv) => {
      const other = await openTokenCipher(otherKv, undefined);
      const rotated = (await rotateSigningSecret(deps, brand.scope, destination.id, 3600))!;
      await ctx.sql`update destinations set previous_secret = ${await other.encrypt("whsec_x")}
        where id = ${destination.id}`;
      const [row] = await ctx.sql<StoredSecrets[]>`
        select id, secret, previous_secret, previous_secret_expires_at from destinations
        where id = ${destination.id}`;
      assert.deepEqual(await openSigningSecrets(deps, row!, new Date()), {
        ok: true,
        secrets: [rotated.secret],
      });
    });
  });
});

Deno.test("destination secret: a plaintext secret rotated out is kept sealed", async () => {
  await withDestination(async ({ ctx, deps, brand, destination }) => {
    await ctx.sql`update destinations set secret = ${destination.secret}
      where id = ${destination.id}`;
    await rotateSigningSecret(deps, brand.scope, destination.id, 3600);
    const [row] = await ctx.sql<{ previous_secret: string }[]>`
      select previous_secret from destinations where id = ${destination.id}`;
    assert.match(row!.previous_secret, /^v1\./);
    assert.equal(await deps.cipher.decrypt(row!.previous_secret), destination.secret);
  });
});
