import { monotonicFactory } from "ulid";
import { createApp } from "./lib/app.ts";
import { loadConfig } from "./lib/config.ts";
import { openStores } from "./lib/stores.ts";

const config = loadConfig(Deno.env.toObject());
const stores = await openStores(config, { serve: true });
const app = createApp({
  kv: stores.kv,
  sql: stores.sql,
  now: () => new Date(),
  newId: monotonicFactory(),
  config,
});

const server = Deno.serve({
  port: config.port,
  onListen: ({ hostname, port }) =>
    console.log(JSON.stringify({
      level: "info",
      message: "listening",
      url: `http://${hostname === "0.0.0.0" ? "localhost" : hostname}:${port}`,
      database: stores.database.mode,
      docs: `http://localhost:${port}/docs`,
    })),
}, app.fetch);

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  await server.shutdown();
  await stores.close();
  Deno.exit(0);
}
Deno.addSignalListener("SIGINT", shutdown);
Deno.addSignalListener("SIGTERM", shutdown);
