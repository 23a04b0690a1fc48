import assert from "node:assert/strict";
import { destinationCommands } from "../../../lib/admin/destination_commands.ts";
import { UsageError } from "../../../lib/admin/command.ts";
import { deliverDue } from "../../../lib/audiences/delivery.ts";
import type { TestContext } from "../../test_support.ts";
import { logChanges, withDestination } from "../audiences/delivery_fixture.ts";

const io = { open: () => Promise.reject(new Error("no file")) };

// deno-lint-ignore no-explicit-any
async function run(ctx: TestContext, name: string, args: string[]): Promise<any> {
  const command = destinationCommands[name]!;
  const stores = {
    kv: ctx.kv,
    sql: ctx.sql,
    database: { mode: "postgres" as const },
    queue: ctx.queue,
    cipher: ctx.deps.cipher,
  };
  return await command.run(stores, command.parse(args), ctx.config, io);
}

Deno.test("destinations commands: list health, list dead deliveries, replay them with their ids", async () => {
  await withDestination(async ({ ctx, deps, brand, segment, destination, receiver }) => {
    receiver.respond = 500;
    await logChanges(ctx.sql, brand.scope, segment, ["+p1"]);
    await deliverDue(deps);

    const listed = await run(ctx, "destinations list", ["--brand", brand.brandId]);
    assert.deepEqual(
      listed.destinations.map((d: { id: string; dead: number }) => [d.id, d.dead]),
      [[destination.id, 1]],
    );
    const dead = await run(ctx, "destinations deliveries", [
      "--destination",
      destination.id,
      "--status",
      "dead",
    ]);
    assert.equal(dead.total, 1);
    const [letter] = dead.deliveries;
    assert.equal(letter.lastError, "HTTP 500");

    const args = ["--destination", destination.id, "--delivery", letter.id];
    assert.deepEqual(await run(ctx, "destinations replay", args), { replayed: [letter.id] });
    receiver.respond = 200;
    await deliverDue(deps);
    assert.deepEqual(receiver.accepted().map((d) => d.profile.id), ["p1"]);
    assert.equal(receiver.received.at(-1)!.deliveryId, letter.id);
    await assert.rejects(run(ctx, "destinations replay", args), /no dead delivery/);
  }, { retryMs: 1 });
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
