import assert from "node:assert/strict";
import { ENTRY_POINTS, fileCircles, layerOf, projectEdges, violations } from "../../.ci/deps.ts";

Deno.test("deps: layers are lib's own files, lib folders, routes and the entry points", () => {
  assert.equal(layerOf("lib/errors.ts"), "lib");
  assert.equal(layerOf("lib/store/db.ts"), "lib/store");
  assert.equal(layerOf("lib/store/migrations/0001_tenancy.ts"), "lib/store");
  assert.equal(layerOf("routes/app_pages/app_pages.tsx"), "routes");
  assert.equal(layerOf("main.ts"), "entry");
  assert.equal(layerOf("workers/forwarder.ts"), "entry");
  assert.equal(layerOf("bench/ingest_load.ts"), null);
});

Deno.test("deps: imports down the order pass", () => {
  assert.deepEqual(
    violations([
      { from: "main.ts", to: "routes/app.ts" },
      { from: "main.ts", to: "lib/admin/cli.ts" },
      { from: "routes/app.ts", to: "lib/http/auth.ts" },
      { from: "lib/http/auth.ts", to: "lib/tenancy/api_keys.ts" },
      { from: "lib/tenancy/api_keys.ts", to: "lib/store/kv_keys.ts" },
      { from: "lib/store/kv_keys.ts", to: "lib/errors.ts" },
      { from: "lib/store/db.ts", to: "lib/store/kv_keys.ts" },
    ]),
    [],
  );
});

Deno.test("deps: an import up the order, a new folder and the CLI in routes fail", () => {
  const found = violations([
    { from: "lib/tenancy/session_token.ts", to: "lib/http/errors.ts" },
    { from: "lib/elsewhere/live.ts", to: "lib/store/db.ts" },
    { from: "routes/app.ts", to: "lib/admin/cli.ts" },
    { from: "lib/start_failure.ts", to: "routes/app.ts" },
  ]);
  assert.deepEqual(found, [
    "lib/elsewhere: not a layer of the documented order (.ci/deps.ts LAYERS)",
    "lib/start_failure.ts -> routes/app.ts: lib imports routes, above it",
    "lib/tenancy/session_token.ts -> lib/http/errors.ts: lib/tenancy imports lib/http, above it",
    "routes/app.ts -> lib/admin/cli.ts: only entry points import lib/admin/cli.ts",
  ]);
});

Deno.test("deps: a circle between files fails, within one folder too", () => {
  const edges = [
    { from: "lib/engine/a.ts", to: "lib/engine/b.ts" },
    { from: "lib/engine/b.ts", to: "lib/engine/c.ts" },
    { from: "lib/engine/c.ts", to: "lib/engine/a.ts" },
    { from: "lib/engine/c.ts", to: "lib/store/db.ts" },
  ];
  assert.deepEqual(fileCircles(edges), [[
    "lib/engine/a.ts",
    "lib/engine/b.ts",
    "lib/engine/c.ts",
    "lib/engine/a.ts",
  ]]);
  assert.deepEqual(violations(edges), [
    "import circle: lib/engine/a.ts -> lib/engine/b.ts -> lib/engine/c.ts -> lib/engine/a.ts",
  ]);
  assert.deepEqual(fileCircles([{ from: "lib/x.ts", to: "lib/x.ts" }]), [["lib/x.ts", "lib/x.ts"]]);
});

Deno.test("deps: the repository follows the rule", async () => {
  const edges = await projectEdges(new URL("../../", import.meta.url), ENTRY_POINTS);
  assert.ok(edges.length > 100);
  assert.deepEqual(violations(edges), []);
});
