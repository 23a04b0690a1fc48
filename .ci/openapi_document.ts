/**
 * Writes the OpenAPI document the service serves (`/openapi.json`, and the operator document
 * `/openapi.json?admin=1`) to files, for `.ci/run` to lint. Usage:
 * `deno run -A --unstable-kv .ci/openapi_document.ts OUT_DIR`.
 *
 * @module
 */
import { createKvQueue } from "../lib/ingest/queue.ts";
import { createApp } from "../routes/app.ts";
import { COMMANDS } from "../lib/admin/command_table.ts";
import { loadConfig } from "../lib/config.ts";
import { createEmbeddedEngine } from "../lib/engine/embedded.ts";
import { ulidSource } from "../lib/ids.ts";
import { openStores } from "../lib/store/stores.ts";
import { lazyTokenCipher } from "../lib/tenancy/token_cipher.ts";
import { lazyIdentifierHasher } from "../lib/privacy/identifiers.ts";

const outDir = Deno.args[0];
if (!outDir) throw new Error("usage: openapi_document.ts OUT_DIR");
const dataDir = await Deno.makeTempDir();
// With an admin token, so that the operator document exists to be linted too.
const config = loadConfig({
  DATA_DIR: dataDir,
  KV_PATH: ":memory:",
  ADMIN_TOKEN: crypto.randomUUID() + crypto.randomUUID(),
});
const stores = await openStores(config, { serve: false });
try {
  const now = () => new Date();
  const app = createApp({
    kv: stores.kv,
    queue: createKvQueue(stores.kv, { newId: ulidSource() }),
    sql: stores.sql,
    engine: createEmbeddedEngine({ sql: stores.sql, now }),
    now,
    newId: ulidSource(),
    config,
    cipher: lazyTokenCipher(stores.kv, config.tokenEncryptionKey),
    hasher: lazyIdentifierHasher(stores.kv, config.tokenEncryptionKey),
  }, { adminCommands: COMMANDS });
  const documents = [["/openapi.json", "openapi"], ["/openapi.json?admin=1", "admin"]] as const;
  for (const [path, file] of documents) {
    const res = await app.request(path);
    if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
    await Deno.writeTextFile(`${outDir}/${file}.json`, await res.text());
    console.log(`${outDir}/${file}.json`);
  }
} finally {
  await stores.close();
  await Deno.remove(dataDir, { recursive: true });
}
