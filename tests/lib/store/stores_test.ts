import assert from "node:assert/strict";
import { loadConfig } from "../../../lib/config.ts";
import { MIGRATIONS, pendingMigrations } from "../../../lib/store/migrations.ts";
import { openStores, StoreOpenError } from "../../../lib/store/stores.ts";
import { DATABASE_URL, freshDatabase } from "../../test_support.ts";

Deno.test("openStores: an unreachable DATABASE_URL is a StoreOpenError naming it", async () => {
  const config = loadConfig({ DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" });
  await assert.rejects(
    openStores(config, { serve: false }),
    (err: unknown) =>
      err instanceof StoreOpenError && err.store === "database" &&
      err.variable === "DATABASE_URL" && /unreachable/.test(err.message),
  );
});

Deno.test("openStores: a KV path that cannot be opened is a StoreOpenError naming KV_PATH", async () => {
  const dir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  try {
    // A directory where the KV file should be.
    await Deno.mkdir(`${dir}/kv.sqlite3`);
    const config = loadConfig({ DATA_DIR: dir, DATABASE_URL: database?.url ?? "" });
    await assert.rejects(
      openStores(config, { serve: false }),
      (err: unknown) =>
        err instanceof StoreOpenError && err.store === "kv" && err.variable === "KV_PATH",
    );
  } finally {
    await database?.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("openStores: MIGRATE=off opens the stores without migrating", async () => {
  const dir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  try {
    // An empty database: a new embedded one, or the server's test database emptied.
    if (database) {
      await database.sql`drop schema public cascade`;
      await database.sql`create schema public`;
    }
    const env = { DATA_DIR: dir, DATABASE_URL: database?.url ?? "", KV_PATH: ":memory:" };
    const skipped = await openStores(loadConfig({ ...env, MIGRATE: "off" }), { serve: false });
    try {
      assert.deepEqual(await pendingMigrations(skipped.sql), MIGRATIONS.map((m) => m.version));
    } finally {
      await skipped.close();
    }
    const migrated = await openStores(loadConfig(env), { serve: false });
    try {
      assert.deepEqual(await pendingMigrations(migrated.sql), []);
    } finally {
      await migrated.close();
    }
  } finally {
    await database?.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("openStores: reopenKv opens the same local KV file again; none for :memory:", async () => {
  const dir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  try {
    const env = { DATA_DIR: dir, DATABASE_URL: database?.url ?? "" };
    const inMemory = await openStores(loadConfig({ ...env, KV_PATH: ":memory:" }), {
      serve: false,
    });
    await inMemory.close();
    assert.equal(inMemory.reopenKv, undefined);
    const stores = await openStores(loadConfig(env), { serve: false });
    try {
      await stores.kv.set(["reopened"], 1);
      const again = await stores.reopenKv!();
      try {
        assert.equal((await again.get(["reopened"])).value, 1);
      } finally {
        again.close();
      }
    } finally {
      await stores.close();
    }
  } finally {
    await database?.close();
    await Deno.remove(dir, { recursive: true });
  }
});
