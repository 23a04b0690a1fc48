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

Deno.test("migrate: version 11 moves each order's line items onto its row, in position order", async () => {
  const database = await freshDatabase();
  const sql = database.sql;
  try {
    // The shape before version 11 (version 6's table), with items stored the old way.
    await sql`alter table orders drop column line_items`;
    await sql`
      create table order_line_items (
        order_id text not null references orders (id) on delete cascade,
        position integer not null,
        title text not null,
        quantity integer not null,
        price numeric(20, 2) not null,
        sku text,
        product_id text,
        variant_id text,
        variant_title text,
        primary key (order_id, position)
      )`;
    await sql`insert into brands (id, name) values ('brand_m', 'm')`;
    await sql`
      insert into orders (id, brand_id, external_id, number, state, billing_status, total,
                          currency_code, created_at, synced_at)
      values ('ord_1', 'brand_m', '1', '#1', 'complete', 'complete', 40.5, 'USD', now(), now()),
             ('ord_2', 'brand_m', '2', '#2', 'complete', 'complete', 0, 'USD', now(), now())`;
    await sql`
      insert into order_line_items (order_id, position, title, quantity, price, sku, product_id)
      values ('ord_1', 1, 'Cap', 1, 10.5, null, null),
             ('ord_1', 0, 'Tee', 2, 15, 'TEE-M', '632910392')`;
    await sql`delete from schema_migrations where version = 11`;

    assert.deepEqual(await migrate(sql), [11]);

    const rows = await sql`select id, line_items from orders order by id`;
    assert.deepEqual(rows.map((row) => [row.id, row.line_items]), [
      ["ord_1", [
        {
          title: "Tee",
          quantity: 2,
          price: "15.00",
          sku: "TEE-M",
          product_id: "632910392",
          variant_id: null,
          variant_title: null,
        },
        {
          title: "Cap",
          quantity: 1,
          price: "10.50",
          sku: null,
          product_id: null,
          variant_id: null,
          variant_title: null,
        },
      ]],
      ["ord_2", []],
    ]);
    const [table] = await sql`select to_regclass('order_line_items') as name`;
    assert.equal(table!.name, null);
  } finally {
    await database.close();
  }
});
