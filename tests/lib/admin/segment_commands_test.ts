/** `segments import`, run as a subprocess exactly as `deno task admin` runs it. */
import assert from "node:assert/strict";
import { DATABASE_URL, freshDatabase } from "../../test_support.ts";
import { json as cliJson, runCli } from "./cli_support.ts";

// deno-lint-ignore no-explicit-any
const json = (result: Parameters<typeof cliJson>[0]): any => cliJson(result);

/** Unomi 2.7's manual (datamodel.adoc:687-716): the leads segment as POSTed to /cxs/segments. */
const LEADS = {
  metadata: { id: "leads", name: "Leads", scope: "systemscope", readOnly: true },
  condition: {
    type: "booleanCondition",
    parameterValues: {
      operator: "and",
      subConditions: [{
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.leadAssignedTo",
          comparisonOperator: "exists",
        },
      }],
    },
  },
};

Deno.test("cli: segments import creates, then updates, reports refusals; JSON on stdout", async () => {
  const dataDir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  const env = { DATA_DIR: dataDir, DATABASE_URL: database?.url ?? "" };
  try {
    const brand = json(
      await runCli(["brand", "create", "--name", "Seg", "--shop", "seg.myshopify.com"], env),
    );
    const file = `${dataDir}/segments.json`;
    await Deno.writeTextFile(
      file,
      JSON.stringify([LEADS, {
        metadata: { id: "geo" },
        condition: { type: "geoLocationSessionCondition" },
      }]),
    );
    const first = json(await runCli(["segments", "import", "--brand", brand.id, file], env));
    assert.deepEqual(first.segments.map((s: { status: string }) => s.status), [
      "created",
      "refused",
    ]);
    assert.deepEqual(
      [first.brand, first.scope, first.created, first.updated, first.refused],
      [brand.id, "seg.myshopify.com", 1, 0, 1],
    );
    assert.match(
      first.segments[1].reasons[0],
      /\$\[1\]\.condition\.type: geoLocationSessionCondition is out of scope/,
    );
    // One object on stdin: the same id is an update.
    const again = json(
      await runCli(["segments", "import", "--brand", brand.id, "-"], env, JSON.stringify(LEADS)),
    );
    assert.deepEqual(again.segments, [
      { index: 0, unomiId: "leads", id: "seg__seg.myshopify.com__leads", status: "updated" },
    ]);
    // Failures: usage (2), unknown brand, a brand without a shop, a file that is not JSON (1).
    const usage = await runCli(["segments", "import", file], env);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--brand is required/);
    const bare = json(await runCli(["brand", "create", "--name", "No shop"], env));
    await Deno.writeTextFile(`${dataDir}/bad.json`, "{not json");
    for (
      const [args, message] of [
        [["--brand", "01ARZ3NDEKTSV4RRFFQ69G5FAV", file], /no brand 01ARZ3NDEKTSV4RRFFQ69G5FAV/],
        [["--brand", bare.id, file], /has no shop/],
        [["--brand", brand.id, `${dataDir}/bad.json`], /is not JSON/],
      ] as [string[], RegExp][]
    ) {
      const failed = await runCli(["segments", "import", ...args], env);
      assert.equal(failed.code, 1, failed.stderr);
      assert.equal(failed.stdout, "");
      assert.match(failed.stderr, message);
    }
  } finally {
    await database?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
