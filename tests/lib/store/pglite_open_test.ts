import assert from "node:assert/strict";
import { PGlite } from "@electric-sql/pglite";
import { openPglite } from "../../../lib/store/pglite_open.ts";
import { MIGRATIONS } from "../../../lib/store/migrations.ts";
// Type-checks the worker's module, which only a Worker loads.
import type {} from "../../../lib/store/pglite_init_worker.ts";

async function withTempDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await run(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

Deno.test("openPglite: a new directory is created migrated, with the lowered settings, and reopens", async () => {
  await withTempDir(async (dir) => {
    const pgDir = `${dir}/pg`;
    const first = await openPglite(pgDir, { migrate: true });
    try {
      const versions = await first.query<{ version: number }>(
        "select version from schema_migrations order by version",
      );
      assert.deepEqual(versions.rows.map((row) => row.version), MIGRATIONS.map((m) => m.version));
      const buffers = await first.query<{ shared_buffers: string }>("show shared_buffers");
      assert.equal(buffers.rows[0]?.shared_buffers, "16MB");
      await first.exec("create table kept (v int); insert into kept values (7)");
    } finally {
      await first.close();
    }
    assert.equal(await exists(`${pgDir}.init`), false);
    assert.equal(await exists(`${pgDir}/PG_VERSION`), true);

    const again = await openPglite(pgDir, { migrate: true });
    try {
      assert.deepEqual((await again.query("select v from kept")).rows, [{ v: 7 }]);
    } finally {
      await again.close();
    }
  });
});

Deno.test("openPglite: without migrate, a new directory has no schema", async () => {
  await withTempDir(async (dir) => {
    const pglite = await openPglite(`${dir}/pg`, { migrate: false });
    try {
      const table = await pglite.query<{ exists: boolean }>(
        "select to_regclass('schema_migrations') is not null as exists",
      );
      assert.equal(table.rows[0]?.exists, false);
    } finally {
      await pglite.close();
    }
  });
});

Deno.test("openPglite: the staging directory of an interrupted first start is replaced", async () => {
  await withTempDir(async (dir) => {
    const pgDir = `${dir}/pg`;
    await Deno.mkdir(`${pgDir}.init/base`, { recursive: true });
    await Deno.writeTextFile(`${pgDir}.init/PG_VERSION`, "half written");
    const pglite = await openPglite(pgDir, { migrate: false });
    try {
      assert.deepEqual((await pglite.query("select 1 as one")).rows, [{ one: 1 }]);
    } finally {
      await pglite.close();
    }
    assert.equal(await exists(`${pgDir}.init`), false);
  });
});

Deno.test("openPglite: a directory PGlite created itself opens with the lowered settings", async () => {
  await withTempDir(async (dir) => {
    const pgDir = `${dir}/pg`;
    const made = await PGlite.create({ dataDir: pgDir });
    await made.exec("create table kept (v int); insert into kept values (1)");
    await made.close();
    const pglite = await openPglite(pgDir, { migrate: true });
    try {
      assert.deepEqual((await pglite.query("select v from kept")).rows, [{ v: 1 }]);
      const buffers = await pglite.query<{ shared_buffers: string }>("show shared_buffers");
      assert.equal(buffers.rows[0]?.shared_buffers, "16MB");
    } finally {
      await pglite.close();
    }
  });
});
