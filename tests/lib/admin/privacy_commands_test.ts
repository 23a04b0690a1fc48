/** `brand set --event-retention-days` and `privacy list`, run as `deno task admin` runs them. */
import assert from "node:assert/strict";
import { json, runCli, withStores } from "./cli_support.ts";

Deno.test("cli: brand set --event-retention-days sets and clears it; privacy list prints the audit", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(["brand", "create", "--name", "P", "--shop", "p.myshopify.com"], env),
    );
    const id = String(brand.id);
    const set = json(
      await runCli(["brand", "set", "--brand", id, "--event-retention-days", "30"], env),
    );
    assert.equal(set.event_retention_days, 30);
    const off = json(
      await runCli(["brand", "set", "--brand", id, "--event-retention-days", "off"], env),
    );
    assert.equal(off.event_retention_days, null);
    for (const bad of ["0", "-1", "ten", "1.5"]) {
      const res = await runCli(["brand", "set", "--brand", id, "--event-retention-days", bad], env);
      assert.equal(res.code, 2, bad);
      assert.match(res.stderr, /--event-retention-days/);
    }
    const list = json(await runCli(["privacy", "list", "--brand", id], env));
    assert.deepEqual(list, { brand: id, requests: [] });
    const usage = json(await runCli(["usage", "--brand", id], env));
    assert.deepEqual(usage.privacy_dropped, []);
  });
});
