/**
 * Writes the OpenAPI document the service serves (`/openapi.json`, and the operator document
 * `/openapi.json?admin=1`) to files, for `.ci/run` to lint. Usage:
 * `deno run -A --unstable-kv .ci/openapi_document.ts OUT_DIR`.
 *
 * @module
 */
import { createApp } from "../routes/app.ts";
import { loadConfig } from "../lib/config.ts";
import { createEmbeddedEngine } from "../lib/engine/embedded.ts";
import { ulidSource } from "../lib/ids.ts";
import { openStores } from "../lib/store/stores.ts";

const outDir = Deno.args[0];
if (!outDir) throw new Error("usage: openapi_document.ts OUT_DIR");
const dataDir = await Deno.makeTempDir();
const config = loadConfig({ DATA_DIR: dataDir, KV_PATH: ":memory:" });
const stores = await openStores(config, { serve: false });
try {
  const now = () => new Date();
  const app = createApp({
    kv: stores.kv,
    sql: stores.sql,
    engine: createEmbeddedEngine({ sql: stores.sql, now }),
    now,
    newId: ulidSource(),
    config,
  });
  const res = await app.request("/openapi.json");
  if (res.status !== 200) throw new Error(`/openapi.json answered ${res.status}`);
  await Deno.writeTextFile(`${outDir}/openapi.json`, await res.text());
  console.log(`${outDir}/openapi.json`);
} finally {
  await stores.close();
  await Deno.remove(dataDir, { recursive: true });
}
