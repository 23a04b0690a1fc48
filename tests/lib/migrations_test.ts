import assert from "node:assert/strict";
import postgres from "postgres";
import type { Sql } from "../../lib/db.ts";
import { migrate, type Migration, MIGRATIONS } from "../../lib/migrations.ts";
import { freshDatabase } from "../test_support.ts";

const PROBE: Migration = {
  version: 9999,
  name: "test_probe",
  sql: `
    create table migration_probe (id integer primary key);
    insert into migration_probe (id) values (1);
  `,
};

async function appliedVersions(sql: Sql): Promise<number[]> {
  const rows = await sql<{ version: number }[]>`
    select version from schema_migrations order by version`;
  return rows.map((row) => row.version);
}

Deno.test("migrate: a fresh test database is already migrated; migrating again is a no-op", async () => {
  const database = await freshDatabase();
  try {
    assert.deepEqual(await appliedVersions(database.sql), MIGRATIONS.map((m) => m.version));
    assert.deepEqual(await migrate(database.sql), []);
    assert.deepEqual(await migrate(database.sql), []);
    assert.deepEqual(await appliedVersions(database.sql), MIGRATIONS.map((m) => m.version));
    const [row] = await database.sql`select name from schema_migrations where version = 1`;
    assert.equal(row?.name, "tenancy");
  } finally {
    await database.close();
  }
});

Deno.test("migrate: versions are strictly increasing and unique", () => {
  const versions = MIGRATIONS.map((m) => m.version);
  assert.ok(versions.length > 0);
  versions.forEach((v, i) => {
    assert.ok(Number.isInteger(v) && v > 0);
    if (i > 0) assert.ok(v > versions[i - 1]!, `${v} after ${versions[i - 1]}`);
  });
});

Deno.test("migrate: an appended migration is applied once, then skipped", async () => {
  const database = await freshDatabase();
  try {
    assert.deepEqual(await migrate(database.sql, [...MIGRATIONS, PROBE]), [9999]);
    assert.deepEqual(await migrate(database.sql, [...MIGRATIONS, PROBE]), []);
    const rows = await database.sql`select id from migration_probe`;
    assert.equal(rows.length, 1);
  } finally {
    await database.close();
  }
});

Deno.test("migrate: two connections migrating at once apply the new migration exactly once", async () => {
  const database = await freshDatabase();
  // On a server, a second client stands in for a second process; on PGlite, a second pooled
  // connection to the same socket server.
  const other = database.url
    ? postgres(database.url, { onnotice: () => {}, max: 1 })
    : database.sql;
  try {
    const list = [...MIGRATIONS, PROBE];
    const [a, b] = await Promise.all([migrate(database.sql, list), migrate(other, list)]);
    assert.deepEqual([...a, ...b], [9999]);
    const [row] = await database.sql<{ n: number }[]>`
      select count(*)::int as n from schema_migrations where version = 9999`;
    assert.equal(row?.n, 1);
    assert.equal((await database.sql`select id from migration_probe`).length, 1);
  } finally {
    if (other !== database.sql) await other.end({ timeout: 5 });
    await database.close();
  }
});

Deno.test("migrate: a failing migration rolls back the whole run", async () => {
  const database = await freshDatabase();
  try {
    const good: Migration = { version: 9998, name: "good", sql: "create table probe_good (x int)" };
    const bad: Migration = { version: 9999, name: "bad", sql: "create table probe_bad (x nope)" };
    await assert.rejects(migrate(database.sql, [...MIGRATIONS, good, bad]));
    assert.deepEqual(await appliedVersions(database.sql), MIGRATIONS.map((m) => m.version));
    const [row] = await database.sql`select to_regclass('probe_good') as t`;
    assert.equal(row?.t, null);
    // The database is still usable and the good migration applies on its own.
    assert.deepEqual(await migrate(database.sql, [...MIGRATIONS, good]), [9998]);
  } finally {
    await database.close();
  }
});
