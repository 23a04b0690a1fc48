import assert from "node:assert/strict";
import { destinationCommands } from "../../../lib/admin/destination_commands.ts";
import { UsageError } from "../../../lib/admin/command.ts";
import { deliverDue } from "../../../lib/audiences/delivery.ts";
import { type TestContext, withContext } from "../../test_support.ts";
import { startReceiver } from "../audiences/webhook_receiver.ts";
import {
  defineDestination,
  defineSegments,
  deliveryDeps,
  logChanges,
} from "../audiences/delivery_fixture.ts";

const io = { open: () => Promise.reject(new Error("no file")) };

// deno-lint-ignore no-explicit-any
async function run(ctx: TestContext, name: string, args: string[]): Promise<any> {
  const command = destinationCommands[name]!;
  const stores = {
    kv: ctx.kv,
    sql: ctx.sql,
    database: { mode: "postgres" as const },
    queue: ctx.queue,
  };
  return await command.run(stores, command.parse(args), ctx.config, io);
}

Deno.test("destinations commands: list health, list dead deliveries, replay them with their ids", async () => {
  const receiver = await startReceiver();
  try {
    await withContext(async (ctx) => {
      const brand = await ctx.seedBrand();
      const scope = brand.scope!;
      const deps = deliveryDeps(ctx.sql, ctx.kv, { retryMs: 1 });
      const [vip] = await defineSegments(ctx.sql, scope, ["VIP"]);
      const dest = await defineDestination(deps, { ...brand, scope }, [vip!], receiver.url);
      receiver.secret = dest.secret;
      receiver.respond = 500;
      await logChanges(ctx.sql, scope, vip!, ["+p1"]);
      await deliverDue(deps);

      const listed = await run(ctx, "destinations list", ["--brand", brand.brandId]);
      assert.deepEqual(
        listed.destinations.map((d: { id: string; dead: number }) => [d.id, d.dead]),
        [[dest.id, 1]],
      );
      const dead = await run(ctx, "destinations deliveries", [
        "--destination",
        dest.id,
        "--status",
        "dead",
      ]);
      assert.equal(dead.total, 1);
      const [letter] = dead.deliveries;
      assert.equal(letter.lastError, "HTTP 500");

      const replayed = await run(ctx, "destinations replay", [
        "--destination",
        dest.id,
        "--delivery",
        letter.id,
      ]);
      assert.deepEqual(replayed, { replayed: [letter.id] });
      receiver.respond = 200;
      await deliverDue(deliveryDeps(ctx.sql, ctx.kv));
      assert.deepEqual(receiver.accepted().map((d) => d.profile.id), ["p1"]);
      assert.equal(receiver.received.at(-1)!.deliveryId, letter.id);
      await assert.rejects(
        run(ctx, "destinations replay", ["--destination", dest.id, "--delivery", letter.id]),
        /no dead delivery/,
      );
    });
  } finally {
    await receiver.close();
  }
});

Deno.test("destinations commands: malformed arguments are usage errors", () => {
  const parse = (name: string, args: string[]) => destinationCommands[name]!.parse(args);
  assert.throws(() => parse("destinations list", []), UsageError);
  assert.throws(() => parse("destinations replay", ["--destination", "x"]), UsageError);
  assert.throws(
    () =>
      parse("destinations deliveries", [
        "--destination",
        "dst_01M8BQQT898JP1WHK235D8NR97",
        "--status",
        "lost",
      ]),
    UsageError,
  );
  assert.throws(
    () =>
      parse("destinations replay", [
        "--destination",
        "dst_01M8BQQT898JP1WHK235D8NR97",
        "--delivery",
        "1",
      ]),
    UsageError,
  );
});
