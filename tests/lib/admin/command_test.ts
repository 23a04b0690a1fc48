/** The argument checks operator commands share. */
import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  brandIdArg,
  dayArg,
  keyIdArg,
  letterIdArg,
  requiredFlag,
  requireWritableBrand,
  UsageError,
} from "../../../lib/admin/command.ts";
import { importCommands } from "../../../lib/admin/import_commands.ts";
import { segmentCommands } from "../../../lib/admin/segment_commands.ts";
import { shopCommands } from "../../../lib/admin/shop_commands.ts";
import { loadConfig } from "../../../lib/config.ts";
import { DomainError } from "../../../lib/errors.ts";
import type { Tx } from "../../../lib/store/db.ts";
import { closeScopeWrites, createBrand, setBrand } from "../../../lib/tenancy/brands.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { freshDatabase, kvQueue, testClock } from "../../test_support.ts";

Deno.test("dayArg: a day that exists on the calendar, nothing else", () => {
  for (const day of ["2026-01-01", "2024-02-29", "2026-12-31", "2000-02-29"]) {
    assert.equal(dayArg(day, "from"), day);
  }
  for (
    const bad of [
      "2026-13-01",
      "2026-00-10",
      "2026-02-29",
      "2100-02-29",
      "2026-04-31",
      "2026-1-01",
      "20261101",
      "2026-11-01T00:00",
      "",
    ]
  ) {
    assert.throws(
      () => dayArg(bad, "from"),
      (err: Error) => err instanceof UsageError && /--from takes a calendar day/.test(err.message),
      bad,
    );
  }
});

Deno.test("ids: brand, key and dead letter ids are checked for their shape", () => {
  const ulid = "01M86TDT9CSKW28VQJZ3VT7SDR";
  assert.equal(brandIdArg(ulid), ulid);
  assert.equal(letterIdArg(ulid), ulid);
  assert.equal(keyIdArg(`key_${ulid}`), `key_${ulid}`);
  for (
    const bad of [
      "",
      "x",
      ulid.toLowerCase(),
      `${ulid}0`,
      "01M86TDT9CSKW28VQJZ3VT7SDU",
      `key_${ulid}`,
    ]
  ) {
    assert.throws(() => brandIdArg(bad), /--brand takes a brand id/, bad);
  }
  for (const bad of [ulid, `key_${ulid.slice(1)}`, "key_../../etc"]) {
    assert.throws(() => keyIdArg(bad), /--id takes a key id/, bad);
  }
  assert.throws(() => requiredFlag({}, "brand"), /--brand is required/);
  assert.equal(requiredFlag({ brand: ulid }, "brand"), ulid);
});

Deno.test("requireWritableBrand: imports and backfills of a brand erased by shop/redact are refused until it is reconnected", async () => {
  const database = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  try {
    const clock = testClock();
    const cipher = await openTokenCipher(kv, undefined);
    const brand = await createBrand(
      { sql: database.sql, newId: monotonicFactory(), now: clock.now, cipher },
      { name: "Erased", shop: "erased.myshopify.com" },
    );
    const stores = {
      kv,
      sql: database.sql,
      database: { mode: "postgres" as const },
      queue: kvQueue(kv),
      cipher,
    };
    await database.sql.begin((tx) =>
      closeScopeWrites(tx as unknown as Tx, "erased.myshopify.com", clock.now())
    );
    const order = JSON.stringify({ external_id: "1", total: "1.00", currency: "USD" });
    const io = { open: () => Promise.resolve(new Response(order).body!) };
    const config = loadConfig({ DATA_DIR: "/nonexistent" });
    const runs = [
      () =>
        importCommands["orders import"]!.run(stores, { brandId: brand.id, file: "-" }, config, io),
      () =>
        segmentCommands["segments import"]!.run(
          stores,
          { brandId: brand.id, file: "-" },
          config,
          io,
        ),
      () =>
        shopCommands["shop sync"]!.run(
          stores,
          { brandId: brand.id, since: null, only: null, background: true },
          config,
          io,
        ),
    ];
    for (const run of runs) {
      await assert.rejects(run(), (err: unknown) => {
        assert.ok(err instanceof DomainError && err.kind === "forbidden", String(err));
        assert.match(err.message, /shop\/redact/);
        return true;
      });
    }
    assert.equal((await database.sql`select count(*)::int as n from orders`)[0]!.n, 0);

    await setBrand({ sql: database.sql, kv, now: clock.now }, {
      brandId: brand.id,
      integration: "connected",
    });
    assert.equal((await requireWritableBrand(stores, brand.id)).brandId, brand.id);
  } finally {
    kv.close();
    await database.close();
  }
});
