import assert from "node:assert/strict";
import postgres from "postgres";
import type { Sql } from "../../../lib/store/db.ts";
import {
  migrate,
  type Migration,
  MIGRATIONS,
  pendingMigrations,
} from "../../../lib/store/migrations.ts";
import { DATABASE_URL, eventually, freshDatabase } from "../../test_support.ts";
import { segmentCondition } from "../../../lib/engine/caller_condition.ts";
import { injectScopePredicate } from "../../../lib/engine/conditions.ts";
import { countMembers, getSegment, segmentView } from "../../../lib/engine/segments.ts";
import { appendChanges } from "../../../lib/audiences/changes.ts";

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

// Main's list before migrations moved to one file each: what databases in the field were migrated
// by. Applied migrations must stay byte-identical, or a database migrated by an older build and
// one migrated by this build could differ without either noticing.
const SNAPSHOT_V17: readonly Migration[] = JSON.parse(
  await Deno.readTextFile(new URL("../../fixtures/migrations_v17.json", import.meta.url)),
);

Deno.test("migrate: every migration of the version-17 snapshot is unchanged, byte for byte", () => {
  assert.equal(SNAPSHOT_V17.length, 17);
  assert.ok(MIGRATIONS.length >= SNAPSHOT_V17.length);
  SNAPSHOT_V17.forEach((old, i) => {
    const now = MIGRATIONS[i]!;
    assert.equal(now.version, old.version);
    assert.equal(now.name, old.name);
    assert.equal(now.sql, old.sql, `migration ${old.version} (${old.name}) was edited`);
  });
});

/** Tables, columns, constraints, indexes, functions and triggers of the public schema. */
async function schemaDump(sql: Sql): Promise<string[]> {
  const rows = await sql<{ line: string }[]>`
    select 'relation ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.reloptions::text, '')
      as line
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public'
    union all
    select 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
      || case when a.attnotnull then ' not null' else '' end
      || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
    from pg_attribute a
    join pg_class c on c.oid = a.attrelid
    join pg_namespace n on n.oid = c.relnamespace
    left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
    where n.nspname = 'public' and a.attnum > 0 and not a.attisdropped
    union all
    select 'constraint ' || c.relname || '.' || k.conname || ' ' || pg_get_constraintdef(k.oid)
    from pg_constraint k
    join pg_class c on c.oid = k.conrelid
    join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public'
    union all
    select 'index ' || indexdef from pg_indexes where schemaname = 'public'
    union all
    select 'function ' || pg_get_functiondef(p.oid)
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname = 'public' and p.prokind in ('f', 'p')
    union all
    select 'trigger ' || pg_get_triggerdef(t.oid)
    from pg_trigger t
    join pg_class c on c.oid = t.tgrelid
    join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and not t.tgisinternal
    order by 1`;
  return rows.map((row) => row.line);
}

Deno.test("migrate: a database migrated by the version-17 build upgrades to this build's schema", async () => {
  const fresh = await freshDatabase();
  const upgraded = await freshDatabase();
  try {
    // An empty database, migrated by the old build's list, then by this build.
    await upgraded.sql.unsafe("drop schema public cascade; create schema public").simple();
    assert.deepEqual(await migrate(upgraded.sql, SNAPSHOT_V17), SNAPSHOT_V17.map((m) => m.version));
    assert.deepEqual(
      await migrate(upgraded.sql),
      MIGRATIONS.slice(SNAPSHOT_V17.length).map((m) => m.version),
    );
    assert.deepEqual(await appliedVersions(upgraded.sql), MIGRATIONS.map((m) => m.version));
    const expected = await schemaDump(fresh.sql);
    assert.ok(expected.length > 100);
    assert.deepEqual(await schemaDump(upgraded.sql), expected);
  } finally {
    await upgraded.close();
    await fresh.close();
  }
});

Deno.test("migrate: version 20 keeps only the caller's tree of each segment; GET shows what it showed", async () => {
  const database = await freshDatabase();
  const sql = database.sql;
  const A = "acme.myshopify.com";
  const B = "other.myshopify.com";
  try {
    // A database as the build before version 20 left it, holding segments as it stored them.
    await sql.unsafe("drop schema public cascade; create schema public").simple();
    await migrate(sql, MIGRATIONS.filter((m) => m.version < 20));
    const zoe = {
      parameterValues: {
        propertyValue: 'Zoë  "q" \u2028 ',
        comparisonOperator: "equals",
        propertyName: "properties.firstName",
      },
      type: "profilePropertyCondition",
    };
    const tree = segmentCondition({
      type: "booleanCondition",
      parameterValues: { operator: "or", subConditions: [zoe, { type: "matchAllCondition" }] },
    });
    // What the build before version 20 stored: the scope's predicate AND-injected in front.
    const before = (scope: string) => JSON.stringify(injectScopePredicate(tree, scope));
    const rows: [string, string, string][] = [
      [A, "zoe", before(A)],
      [B, "zoe", before(B)],
      // Other shapes are left as they are: another scope's predicate in front, no predicate,
      // the predicate and a third condition.
      [A, "foreign", before(B)],
      [A, "bare", JSON.stringify(tree)],
      [A, "three", `${before(A).slice(0, -3)},{"type":"matchAllCondition"}]}}`],
    ];
    for (const [scope, key, text] of rows) {
      await sql`
        insert into segments (scope, id, name, condition, created_at, updated_at)
        values (${scope}, ${`seg__${scope}__${key}`}, ${key}, ${text}::text::json, now(), now())`;
    }
    assert.deepEqual(await migrate(sql, MIGRATIONS.filter((m) => m.version <= 20)), [20]);
    const stored = async (scope: string, key: string) =>
      (await sql<{ text: string }[]>`
        select condition::text as text from segments
        where scope = ${scope} and id = ${`seg__${scope}__${key}`}`)[0]!.text;
    assert.equal(await stored(A, "zoe"), JSON.stringify(tree));
    assert.equal(await stored(B, "zoe"), JSON.stringify(tree));
    for (const [scope, key, text] of rows.slice(2)) assert.equal(await stored(scope, key), text);
    // GET shows the rewritten rows byte for byte as before, and they evaluate (on the schema
    // of today's build).
    await migrate(sql);
    for (const scope of [A, B]) {
      const segment = (await getSegment(sql, scope, `seg__${scope}__zoe`))!;
      assert.equal(JSON.stringify(segmentView(segment).condition), before(scope));
      assert.equal(await countMembers(sql, segment, new Date(), 10), 0);
    }
  } finally {
    await database.close();
  }
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

/** Brands a and b with one contact each (ca, cb). */
async function seedReferences(sql: Sql): Promise<void> {
  await sql`insert into brands (id, name) values ('a', 'a'), ('b', 'b')`;
  await sql`
    insert into contacts (id, brand_id, created_at, updated_at)
    values ('ca', 'a', now(), now()), ('cb', 'b', now(), now())`;
}

/** Inserts orders given as [id, brand, contact], in one statement. */
async function insertOrders(sql: Sql, rows: [string, string, string | null][]): Promise<void> {
  const json = rows.map(([id, brand_id, contact_id]) => ({ id, brand_id, contact_id }));
  await sql`
    insert into orders (id, brand_id, external_id, number, state, billing_status, total,
                        currency_code, contact_id, created_at, synced_at)
    select r.id, r.brand_id, r.id, '#1', 'complete', 'complete', 1, 'USD', r.contact_id, now(),
           now()
    from jsonb_to_recordset(${sql.json(json as never)}::jsonb)
      as r(id text, brand_id text, contact_id text)`;
}

async function contactOf(sql: Sql, orderId: string): Promise<string | null | undefined> {
  const [row] = await sql<{ contact_id: string | null }[]>`
    select contact_id from orders where id = ${orderId}`;
  return row?.contact_id;
}

const isForeignKeyViolation = (err: unknown) => (err as { code?: string }).code === "23503";

Deno.test("migrate: version 13 checks orders' brand and contact per statement, as the foreign keys did", async () => {
  const database = await freshDatabase();
  const sql = database.sql;
  try {
    await seedReferences(sql);
    await insertOrders(sql, [["o1", "a", "ca"], ["o2", "a", null]]);
    // A missing brand, a missing contact, another brand's contact: the whole statement fails.
    await assert.rejects(insertOrders(sql, [["o3", "nope", null]]), isForeignKeyViolation);
    await assert.rejects(
      insertOrders(sql, [["o4", "a", "ca"], ["o5", "a", "missing"]]),
      isForeignKeyViolation,
    );
    await assert.rejects(insertOrders(sql, [["o6", "a", "cb"]]), isForeignKeyViolation);
    await assert.rejects(
      sql`update orders set contact_id = 'cb' where id = 'o2'`,
      isForeignKeyViolation,
    );
    await assert.rejects(
      sql`update orders set brand_id = 'b' where id = 'o2'`,
      isForeignKeyViolation,
    );
    const ids = await sql<{ id: string }[]>`select id from orders order by id`;
    assert.deepEqual(ids.map((row) => row.id), ["o1", "o2"]);

    // Deleting a contact unlinks its orders (on delete set null) ...
    await sql`update orders set contact_id = 'ca' where id = 'o2'`;
    await sql`delete from contacts where id = 'ca'`;
    assert.equal(await contactOf(sql, "o1"), null);
    assert.equal(await contactOf(sql, "o2"), null);
    // ... and deleting a brand deletes its orders (on delete cascade).
    await insertOrders(sql, [["o7", "b", "cb"]]);
    await sql`delete from brands where id = 'a'`;
    const left = await sql<{ id: string }[]>`select id from orders order by id`;
    assert.deepEqual(left.map((row) => row.id), ["o7"]);
  } finally {
    await database.close();
  }
});

Deno.test("migrate: version 15 checks contacts' brand per statement, as the foreign key did", async () => {
  const database = await freshDatabase();
  const sql = database.sql;
  try {
    await seedReferences(sql);
    const insertContacts = (rows: [string, string][]) =>
      sql`
        insert into contacts (id, brand_id, created_at, updated_at)
        select r.id, r.brand_id, now(), now()
        from jsonb_to_recordset(${sql.json(rows.map(([id, brand_id]) => ({ id, brand_id })))})
          as r(id text, brand_id text)`;
    await insertContacts([["ca2", "a"], ["cb2", "b"]]);
    // A missing brand fails the whole statement; a contact cannot move to another brand.
    await assert.rejects(insertContacts([["ok", "a"], ["bad", "nope"]]), isForeignKeyViolation);
    await assert.rejects(
      sql`update contacts set brand_id = 'b' where id = 'ca'`,
      isForeignKeyViolation,
    );
    await sql`update contacts set email = 'ann@example.com' where id = 'ca'`;
    const ids = await sql<{ id: string }[]>`select id from contacts order by id`;
    assert.deepEqual(ids.map((row) => row.id), ["ca", "ca2", "cb", "cb2"]);
    // Deleting a brand deletes its contacts (on delete cascade), and its orders first.
    await insertOrders(sql, [["o1", "a", "ca"], ["o2", "b", "cb"]]);
    await sql`delete from brands where id = 'a'`;
    const left = await sql<{ id: string }[]>`
      select id from contacts union all select id from orders order by id`;
    assert.deepEqual(left.map((row) => row.id), ["cb", "cb2", "o2"]);
  } finally {
    await database.close();
  }
});

Deno.test("migrate: version 17 checks a many-row contacts update row by row, on the id", async () => {
  const database = await freshDatabase();
  const sql = database.sql;
  try {
    await seedReferences(sql);
    await sql`
      insert into contacts (id, brand_id, created_at, updated_at)
      select 'm' || g, case when g % 2 = 0 then 'a' else 'b' end, now(), now()
      from generate_series(1, 2000) g`;
    // Every row of both brands updated at once, none moving: the statement passes.
    const updated = await sql`update contacts set email = id || '@example.com'`;
    assert.equal(updated.count, 2002);
    // One row among thousands moving to another brand fails the whole statement, whichever
    // rows the others are.
    await assert.rejects(
      sql`update contacts set email = null,
                              brand_id = case when id = 'm1000' then 'b' else brand_id end`,
      isForeignKeyViolation,
    );
    // Two rows swapping brands: each row is compared with its own old row, not another's.
    await assert.rejects(
      sql`update contacts set brand_id = case id when 'ca' then 'b' else 'a' end
          where id in ('ca', 'cb')`,
      isForeignKeyViolation,
    );
    const [counts] = await sql<{ a: number; b: number; emails: number }[]>`
      select count(*) filter (where brand_id = 'a')::int as a,
             count(*) filter (where brand_id = 'b')::int as b,
             count(email)::int as emails
      from contacts`;
    assert.deepEqual(counts, { a: 1001, b: 1001, emails: 2002 });
  } finally {
    await database.close();
  }
});

Deno.test({
  name: "migrate: version 15, a brand being deleted waits for contacts being written to it",
  ignore: !DATABASE_URL,
  async fn() {
    const database = await freshDatabase();
    const sql = database.sql;
    try {
      await seedReferences(sql);
      // The contact's statement locks the brand for key share; the delete waits, then removes
      // the committed contact with its brand.
      const { outcome } = await interleave(
        sql,
        (tx) =>
          tx`insert into contacts (id, brand_id, created_at, updated_at)
                   values ('late', 'a', now(), now())`,
        () => sql`delete from brands where id = 'a'`,
      );
      await outcome;
      const left = await sql<{ id: string }[]>`select id from contacts order by id`;
      assert.deepEqual(left.map((row) => row.id), ["cb"]);
    } finally {
      await database.close();
    }
  },
});

/** Waits until `statement` waits for a lock, or (were nothing to hold it) settles. */
async function blockedOrSettled(sql: Sql, statement: Promise<unknown>): Promise<void> {
  let settled = false;
  statement.then(() => (settled = true), () => (settled = true));
  await eventually(async () => {
    if (settled) return true;
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_locks where not granted`;
    return row!.n > 0;
  });
}

/**
 * Runs `first` in a transaction held open while `second` starts on another connection, commits
 * it once `second` waits for a lock (or, were nothing to hold it, has settled), and returns
 * `second`'s outcome, settled.
 */
async function interleave(
  sql: Sql,
  first: (tx: Sql) => Promise<unknown>,
  second: () => Promise<unknown>,
): Promise<{ outcome: Promise<unknown> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let ran!: () => void;
  const started = new Promise<void>((resolve) => (ran = resolve));
  const held = sql.begin(async (tx) => {
    await first(tx as unknown as Sql);
    ran();
    await released;
  });
  let outcome: Promise<unknown> | undefined;
  try {
    await Promise.race([started, held]);
    outcome = second();
    await blockedOrSettled(sql, outcome);
    release();
    await held;
    await Promise.allSettled([outcome]);
    return { outcome };
  } finally {
    release();
    await Promise.allSettled([held, outcome]);
  }
}

Deno.test(
  "migrate: version 13, a contact deleted while an order naming it is written is unlinked from it",
  {
    // Two transactions at once: PGlite runs one session.
    ignore: !DATABASE_URL,
  },
  async () => {
    const database = await freshDatabase();
    const sql = database.sql;
    try {
      await seedReferences(sql);
      // The delete waits for the order's transaction, then unlinks the order it did not see.
      const { outcome } = await interleave(
        sql,
        (tx) => insertOrders(tx, [["o1", "a", "ca"]]),
        async () => await sql`delete from contacts where id = 'ca'`,
      );
      await outcome;
      assert.equal(await contactOf(sql, "o1"), null);
    } finally {
      await database.close();
    }
  },
);

Deno.test(
  "migrate: version 13, an order naming a contact being deleted fails once the delete commits",
  {
    ignore: !DATABASE_URL,
  },
  async () => {
    const database = await freshDatabase();
    const sql = database.sql;
    try {
      await seedReferences(sql);
      const { outcome } = await interleave(
        sql,
        (tx) => tx`delete from contacts where id = 'ca'`,
        () => insertOrders(sql, [["o1", "a", "ca"]]),
      );
      await assert.rejects(outcome, isForeignKeyViolation);
      assert.equal(await contactOf(sql, "o1"), undefined);
    } finally {
      await database.close();
    }
  },
);

Deno.test("pendingMigrations: none on a migrated database, the appended one before it runs", async () => {
  const database = await freshDatabase();
  try {
    assert.deepEqual(await pendingMigrations(database.sql), []);
    assert.deepEqual(await pendingMigrations(database.sql, [...MIGRATIONS, PROBE]), [9999]);
    await migrate(database.sql, [...MIGRATIONS, PROBE]);
    assert.deepEqual(await pendingMigrations(database.sql, [...MIGRATIONS, PROBE]), []);
    await database.sql`drop table schema_migrations`;
    assert.deepEqual(await pendingMigrations(database.sql), MIGRATIONS.map((m) => m.version));
  } finally {
    await database.close();
  }
});

Deno.test("migrate: version 28 moves memberships and the feed into compact rows; ids, order and positions carry over", async () => {
  const database = await freshDatabase();
  const sql = database.sql;
  const A = "acme.myshopify.com";
  const t1 = new Date("2026-11-20T10:00:00.123Z");
  const t2 = new Date("2026-11-21T10:00:00.000Z");
  try {
    // A database as the build before version 28 left it.
    await sql.unsafe("drop schema public cascade; create schema public").simple();
    await migrate(sql, MIGRATIONS.filter((m) => m.version < 28));
    await sql`
      insert into segment_members (scope, segment_id, profile_id, entered_at) values
        (${A}, 's1', 'p1', ${t1}), (${A}, 's2', 'p1', ${t2}), (${A}, 's1', 'p2', ${t1})`;
    const old = [
      ["01JOLD0000000000000000000A", "s1", "p1", "entered", t1],
      ["01JOLD0000000000000000000B", "s1", "p2", "entered", t1],
      ["01JOLD0000000000000000000C", "s2", "p1", "entered", t2],
      ["01JOLD0000000000000000000D", "s1", "p3", "entered", t2],
    ] as const;
    for (const [id, segment, profile, change, at] of old) {
      await sql`
        insert into segment_changes (id, scope, segment_id, profile_id, change, at)
        values (${id}, ${A}, ${segment}, ${profile}, ${change}, ${at})`;
    }
    const seqs = (await sql<{ seq: string }[]>`
      select seq::text as seq from segment_changes order by seq`).map((r) => BigInt(r.seq));
    // A destination that had delivered up to the second change, one delivery of the third.
    await sql`
      insert into destinations (id, brand_id, scope, name, type, url, secret, segments, cursor,
                                created_at, updated_at)
      values ('dst_1', 'brand_a', ${A}, 'crm', 'webhook', 'https://example.com/h', 's',
              array['s1', 's2'], ${String(seqs[1])}, now(), now())`;
    await sql`
      insert into destination_deliveries (id, destination_id, scope, payload, count, first_seq,
        last_seq, status, created_at, next_attempt_at, retry_until)
      values ('dlv_1', 'dst_1', ${A}, '{}', 1, ${String(seqs[2])}, ${String(seqs[2])},
              'pending', now(), now(), now())`;

    assert.deepEqual(await migrate(sql, MIGRATIONS.filter((m) => m.version <= 28)), [28]);
    const members = await sql<{ segment_id: string; profile_id: string; entered_at: Date }[]>`
      select segment_id, profile_id, entered_at from segment_members
      order by profile_id, segment_id`;
    assert.deepEqual(
      members.map((m) => [m.segment_id, m.profile_id, m.entered_at.toISOString()]),
      [["s1", "p1", t1.toISOString()], ["s2", "p1", t2.toISOString()], [
        "s1",
        "p2",
        t1.toISOString(),
      ]],
    );
    const changes = await sql<{ position: string; id: string; profile_id: string }[]>`
      select position::text as position, id, profile_id from segment_changes order by position`;
    assert.deepEqual(changes.map((c) => c.id), old.map(([id]) => id));
    // The destination resumes after the second change: the third is its pending delivery's,
    // the fourth comes next.
    const [destination] = await sql<{ cursor: string }[]>`
      select cursor::text as cursor from destinations where id = 'dst_1'`;
    assert.equal(destination!.cursor, changes[1]!.position);
    const [delivery] = await sql<{ first: string; last: string }[]>`
      select first_position::text as first, last_position::text as last
      from destination_deliveries where id = 'dlv_1'`;
    assert.deepEqual([delivery!.first, delivery!.last], [
      changes[2]!.position,
      changes[2]!.position,
    ]);
    // A feed cursor minted before the upgrade held a seq: seq * 1024 is its position.
    assert.equal(changes[1]!.position, String(seqs[1]! * 1024n));
    // Later writes come after every migrated change.
    await migrate(sql);
    await sql.begin((tx) =>
      appendChanges(tx, A, [{ segmentId: "s1", profileId: "p9", change: "entered", at: t2 }])
    );
    const [last] = await sql<{ id: string; position: string }[]>`
      select id, position::text as position from segment_changes order by position desc limit 1`;
    assert.ok(BigInt(last!.position) > BigInt(changes[3]!.position));
    assert.match(last!.id, /^chg_[0-9a-f]{16}$/);
  } finally {
    await database.close();
  }
});
