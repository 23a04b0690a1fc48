/** `insights fit`, run as a subprocess exactly as `deno task admin` runs it. */
import assert from "node:assert/strict";
import { DATABASE_URL, freshDatabase } from "../../test_support.ts";
import { predictionsFitQueuedKey } from "../../../lib/store/kv_keys.ts";
import { syntheticOrders } from "../commerce/predictions/order_fixture.ts";
import { json as cliJson, runCli } from "./cli_support.ts";

// deno-lint-ignore no-explicit-any
const json = (result: Parameters<typeof cliJson>[0]): any => cliJson(result);

Deno.test("cli: orders import queues a refit; insights fit prints the predictions", async () => {
  const dataDir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  const env = {
    DATA_DIR: dataDir,
    DATABASE_URL: database?.url ?? "",
    PREDICTIONS_MIN_CUSTOMERS: "40",
  };
  try {
    const brand = json(
      await runCli(["brand", "create", "--name", "P", "--shop", "p.myshopify.com"], env),
    );
    const early = json(await runCli(["insights", "fit", "--brand", brand.id], env));
    assert.equal(early.status, "insufficient_data");
    assert.deepEqual(early.reasons[0], "0 customers with completed orders; at least 40 needed");

    const lines = syntheticOrders(120, 500, new Date());
    const imported = json(
      await runCli(
        ["orders", "import", "--brand", brand.id, "-"],
        env,
        lines.map((l) => JSON.stringify(l)).join("\n"),
      ),
    );
    assert.equal(imported.rejected.length, 0);
    const kv = await Deno.openKv(`${dataDir}/kv.sqlite3`);
    try {
      assert.notEqual((await kv.get(predictionsFitQueuedKey(brand.id))).value, null);
    } finally {
      kv.close();
    }

    const fitted = json(await runCli(["insights", "fit", "--brand", brand.id], env));
    assert.equal(fitted.brand, brand.id);
    assert.equal(fitted.status, "ready");
    assert.equal(fitted.customers, 120);
    assert.ok(["bgnbd", "mbgnbd"].includes(fitted.model.selected));
    assert.equal(fitted.validation.holdout_days, 90);
    assert.equal(typeof fitted.fit_ms, "number");

    const missing = await runCli(["insights", "fit", "--brand", "01M8703TW14VX6A8TDKZC5ZE9E"], env);
    assert.notEqual(missing.code, 0);
  } finally {
    await database?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
