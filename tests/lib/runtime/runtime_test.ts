import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { loadConfig } from "../../../lib/config.ts";
import { acceptEvents } from "../../../lib/ingest/accept.ts";
import { createIngestQueue, openRuntime } from "../../../lib/runtime/runtime.ts";
import { DATABASE_URL, eventually, freshDatabase, withKv } from "../../test_support.ts";

const newId = monotonicFactory();

async function withEnv(fn: (env: Record<string, string>) => Promise<void>): Promise<void> {
  const dataDir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  try {
    await fn({ DATA_DIR: dataDir, DATABASE_URL: database?.url ?? "", KV_PATH: ":memory:" });
  } finally {
    await database?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

Deno.test("createIngestQueue: INGEST_QUEUE picks Deno KV's queue or the outbox", async () => {
  await withKv((kv) => {
    for (const kind of ["kv", "outbox"] as const) {
      const config = loadConfig({ DATA_DIR: "/nonexistent", INGEST_QUEUE: kind });
      const queue = createIngestQueue(kv, config, newId);
      assert.equal(queue.kind, kind);
      assert.equal(queue.kv, kv);
      queue.stop();
    }
  });
});

for (const kind of ["kv", "outbox"] as const) {
  Deno.test(`openRuntime (${kind}): a batch accepted is applied by the runtime's forwarder; close ends it`, async () => {
    await withEnv(async (env) => {
      const runtime = await openRuntime(loadConfig({ ...env, INGEST_QUEUE: kind }), {
        serve: false,
      });
      let forwarding: Promise<void> | undefined;
      try {
        assert.equal(runtime.queue.kind, kind);
        assert.equal(runtime.queue.kv, runtime.kv);
        forwarding = runtime.startForwarder();
        const events = ["p1", "p2"].map((profileId, index) => ({
          index,
          event: { id: newId(), eventType: "page_viewed", profileId },
          storedBytes: 200,
        }));
        await acceptEvents(
          runtime,
          { brandId: "b1", scope: "acme.myshopify.com" },
          "server",
          events,
        );
        await eventually(async () => (await runtime.queue.backlog()) === 0);
        const [row] = await runtime.sql`select count(*)::int as n from events`;
        assert.equal(row!.n, 2);
      } finally {
        await runtime.close();
      }
      await forwarding;
    });
  });
}
