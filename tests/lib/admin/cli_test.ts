/** The operator CLI, run as a subprocess exactly as `deno task admin` runs it. */
import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { loadConfig } from "../../../lib/config.ts";
import { type EventsMessage, writeDeadLetter } from "../../../lib/ingest/queue.ts";
import { recordRejectedMessages } from "../../../lib/ingest/rejected_messages.ts";
import { usageDailyKey } from "../../../lib/store/kv_keys.ts";
import { openStores } from "../../../lib/store/stores.ts";
import { MIGRATIONS } from "../../../lib/store/migrations.ts";
import { authenticateApiKey } from "../../../lib/tenancy/api_keys.ts";
import { COMMANDS } from "../../../lib/admin/command_table.ts";
import { DATABASE_URL } from "../../test_support.ts";
import { json, ROOT, runCli, withService, withStores } from "./cli_support.ts";

// A well-formed brand id no brand has.
const MISSING = "01M86TDT9CSKW28VQJZ3VT7SDR";

Deno.test("cli: brand create, brand set and key issue print one JSON object each", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(
        ["brand", "create", "--name", "Acme", "--shop", "Acme.myshopify.com", "--beta"],
        env,
      ),
    );
    assert.deepEqual(Object.keys(brand).sort(), ["id", "name", "shop"]);
    assert.equal(brand.name, "Acme");
    assert.equal(brand.shop, "acme.myshopify.com");

    const set = json(
      await runCli(
        [
          "brand",
          "set",
          "--brand",
          String(brand.id),
          "--beta",
          "off",
          "--integration",
          "disconnected",
        ],
        env,
      ),
    );
    assert.deepEqual(set, {
      id: brand.id,
      name: "Acme",
      shop: "acme.myshopify.com",
      beta: false,
      integration: "disconnected",
      redacted_at: null,
      event_retention_days: null,
    });

    const key = json(
      await runCli(["key", "issue", "--brand", String(brand.id), "--name", "ci"], env),
    );
    assert.deepEqual(Object.keys(key).sort(), ["id", "key", "prefix"]);
    assert.match(String(key.key), /^svc_[0-9A-Za-z]{36}$/);
    assert.ok(String(key.key).startsWith(String(key.prefix)));

    const bare = json(await runCli(["brand", "create", "--name", "No shop"], env));
    assert.equal(bare.shop, null);
  });
});

Deno.test("cli: failures go to stderr with a non-zero exit and nothing on stdout", async () => {
  await withStores(async (env) => {
    const cases: [string[], number, RegExp][] = [
      [["brand", "create"], 2, /--name is required/],
      [["brand", "create", "--name", "X", "--bogus"], 2, /bogus/],
      [["brand", "set", "--brand", MISSING, "--beta", "maybe"], 2, /on or off/],
      [
        ["brand", "set", "--brand", MISSING, "--integration", "sideways"],
        2,
        /connected or disconnected/,
      ],
      [["frobnicate"], 2, /unknown command/],
      [["brand", "create", "--name", "X", "--shop", "example.com"], 1, /myshopify\.com/],
      [["brand", "set", "--brand", MISSING, "--beta", "on"], 1, /no brand 01M8/],
      [["key", "issue", "--brand", MISSING], 1, /no brand 01M8/],
      [["orders", "import", "--brand", MISSING, "-"], 1, /no brand 01M8/],
      [["orders", "import", "--brand", MISSING], 2, /one FILE/],
      // Ids are checked for their shape before any store is opened.
      [["key", "issue", "--brand", "missing"], 2, /--brand takes a brand id.*"missing"/],
      [["brand", "show", "--brand", "01m86tdt9cskw28vqjz3vt7sdr"], 2, /--brand takes a brand id/],
      [["key", "revoke", "--brand", MISSING, "--id", MISSING], 2, /--id takes a key id/],
      [["key", "revoke", "--brand", MISSING], 2, /--id is required/],
      [["deadletter", "show", "--id", "../x"], 2, /--id takes a dead letter id/],
      [["deadletter", "list", "--brand", "x y"], 2, /--brand takes a brand id/],
      // Days must exist on the calendar, not just look like one.
      [["usage", "--brand", MISSING, "--from", "2026-13-01"], 2, /--from takes a calendar day/],
      [["usage", "--brand", MISSING, "--to", "2026-02-30"], 2, /--to takes a calendar day/],
      [["usage", "--brand", MISSING, "--from", "2026-11-02", "--to", "2026-11-01"], 2, /after/],
      [["brand", "list", "extra"], 2, /positional/],
    ];
    for (const [args, code, message] of cases) {
      const result = await runCli(args, env);
      assert.equal(result.code, code, `${args.join(" ")}: ${result.stderr}`);
      assert.equal(result.stdout, "", args.join(" "));
      assert.match(result.stderr, message, args.join(" "));
    }
    const shop = ["--shop", "taken.myshopify.com"];
    json(await runCli(["brand", "create", "--name", "First", ...shop], env));
    const second = await runCli(["brand", "create", "--name", "Second", ...shop], env);
    assert.equal(second.code, 1);
    assert.match(second.stderr, /belongs to another brand/);
  });
});

Deno.test("cli: works in a second terminal while the service runs on the same stores", async () => {
  await withStores(async (env) => {
    await withService(env, async (url) => {
      const brand = json(
        await runCli(["brand", "create", "--name", "Live", "--shop", "live.myshopify.com"], env),
      );
      const key = json(await runCli(["key", "issue", "--brand", String(brand.id)], env));
      const res = await fetch(`${url}/cdp/events/types`, {
        headers: { Authorization: `Bearer ${key.key}` },
      });
      assert.equal(res.status, 200);
      assert.equal((await res.json()).scope, "live.myshopify.com");
    });
    // With the service gone the CLI owns the stores itself, and finds what it wrote before.
    const after = await runCli([
      "brand",
      "create",
      "--name",
      "Again",
      "--shop",
      "live.myshopify.com",
    ], env);
    assert.equal(after.code, 1);
    assert.match(after.stderr, /belongs to another brand/);
  });
});

Deno.test("cli: deadletter list shows what the forwarder gave up on; replay applies it once", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(["brand", "create", "--name", "DL", "--shop", "dl.myshopify.com"], env),
    );
    const config = loadConfig(env);
    const newId = monotonicFactory();
    const message: EventsMessage = {
      kind: "events",
      id: newId(),
      brandId: String(brand.id),
      batch: {
        scope: "dl.myshopify.com",
        source: "server",
        receivedAt: "2026-11-21T12:00:00Z",
        events: [
          { id: newId(), eventType: "page_viewed", profileId: "dl_1" },
          { id: newId(), eventType: "page_viewed", profileId: "dl_2" },
        ],
      },
    };
    const kv = await Deno.openKv(config.kvPath);
    await writeDeadLetter(kv, message, "engine unreachable", new Date("2026-11-21T12:00:01Z"));
    kv.close();

    const listed = json(await runCli(["deadletter", "list"], env));
    assert.deepEqual(listed, {
      deadLetters: [{
        id: message.id,
        brand: brand.id,
        scope: "dl.myshopify.com",
        source: "server",
        events: 2,
        reason: "engine unreachable",
        failed_at: "2026-11-21T12:00:01.000Z",
      }],
    });
    assert.deepEqual(json(await runCli(["deadletter", "list", "--brand", MISSING], env)), {
      deadLetters: [],
    });

    const replayed = json(await runCli(["deadletter", "replay", "--id", message.id], env));
    assert.deepEqual(replayed, { replayed: [{ id: message.id, applied: 2, failed: [] }] });
    assert.deepEqual(json(await runCli(["deadletter", "list"], env)), { deadLetters: [] });
    const again = await runCli(["deadletter", "replay", "--id", message.id], env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /no dead letter/);
    assert.deepEqual(json(await runCli(["deadletter", "replay", "--all"], env)), { replayed: [] });
    const usage = await runCli(["deadletter", "replay"], env);
    assert.equal(usage.code, 2);

    const stores = await openStores(config, { serve: false });
    try {
      const [row] = await stores.sql`select count(*)::int as n from events`;
      assert.equal(row!.n, 2);
    } finally {
      await stores.close();
    }
  });
});

Deno.test("cli: rejected list shows the messages refused inside a brand's accepted requests", async () => {
  await withStores(async (env) => {
    const config = loadConfig(env);
    const newId = monotonicFactory();
    const brandId = newId();
    const kv = await Deno.openKv(config.kvPath);
    await recordRejectedMessages(
      kv,
      { brandId, door: "POST /v1/t", at: new Date("2026-11-21T12:00:00Z"), newId: () => newId() },
      [{ index: 0, errors: [{ path: "$.userId", message: "must not contain ':'" }] }],
      [{ userId: "a:b", event: "X" }],
    );
    kv.close();
    const listed = json(await runCli(["rejected", "list", "--brand", brandId], env));
    assert.equal(listed.brand, brandId);
    assert.equal(listed.count, 1);
    const [message] = listed.rejected as Record<string, unknown>[];
    assert.deepEqual({ ...message, id: undefined }, {
      id: undefined,
      door: "POST /v1/t",
      at: "2026-11-21T12:00:00.000Z",
      index: 0,
      errors: [{ path: "$.userId", message: "must not contain ':'" }],
      excerpt: '{"userId":"a:b","event":"X"}',
    });
    assert.deepEqual(json(await runCli(["rejected", "list", "--brand", MISSING], env)), {
      brand: MISSING,
      count: 0,
      rejected: [],
    });
    assert.equal((await runCli(["rejected", "list"], env)).code, 2);
    assert.equal(
      (await runCli(["rejected", "list", "--brand", brandId, "--limit", "0"], env)).code,
      2,
    );
  });
});

Deno.test("cli: deadletter show prints a letter's events; replay --events applies the operator's fix", async () => {
  await withStores(async (env) => {
    const config = loadConfig(env);
    const newId = monotonicFactory();
    const good = { id: newId(), eventType: "page_viewed", profileId: "fix_1" };
    const poison = {
      id: newId(),
      eventType: "page_viewed",
      profileId: "fix_2",
      properties: { title: "a\u0000b" },
    };
    const message: EventsMessage = {
      kind: "events",
      id: newId(),
      brandId: "brand_fix",
      batch: {
        scope: "fix.myshopify.com",
        source: "server",
        receivedAt: "2026-11-21T12:00:00Z",
        events: [good, poison],
      },
    };
    const kv = await Deno.openKv(config.kvPath);
    await writeDeadLetter(kv, message, "retries exhausted", new Date("2026-11-21T12:00:01Z"));
    kv.close();

    // Replayed as it is, the valid event applies and the letter keeps the poison one alone.
    const first = json(await runCli(["deadletter", "replay", "--id", message.id], env));
    const [outcome] = first.replayed as { applied: number; failed: { error: string }[] }[];
    assert.equal(outcome!.applied, 1);
    assert.match(outcome!.failed[0]!.error, /unsupported Unicode escape sequence.*22P05/);
    const shown = json(await runCli(["deadletter", "show", "--id", message.id], env));
    assert.deepEqual(shown, {
      id: message.id,
      brand: "brand_fix",
      scope: "fix.myshopify.com",
      source: "server",
      reason: `${poison.id}: 400 ${outcome!.failed[0]!.error}`,
      failed_at: shown.failed_at,
      events: [poison],
    });

    // The operator edits what `show` printed and gives it back; a bad edit changes nothing.
    const file = `${await Deno.makeTempDir()}/letter.json`;
    await Deno.writeTextFile(file, JSON.stringify(shown));
    const refused = await runCli(
      ["deadletter", "replay", "--id", message.id, "--events", file],
      env,
    );
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /\$\.events\[0\]\.properties\.title: contains NUL/);
    await Deno.writeTextFile(
      file,
      JSON.stringify({ ...shown, events: [{ ...poison, properties: { title: "ab" } }] }),
    );
    const fixed = json(
      await runCli(["deadletter", "replay", "--id", message.id, "--events", file], env),
    );
    assert.deepEqual(fixed, { replayed: [{ id: message.id, applied: 1, failed: [] }] });
    assert.deepEqual(json(await runCli(["deadletter", "list"], env)), { deadLetters: [] });
    const gone = await runCli(["deadletter", "show", "--id", message.id], env);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /no dead letter/);
    const usage = await runCli(["deadletter", "replay", "--all", "--events", file], env);
    assert.equal(usage.code, 2);

    const stores = await openStores(config, { serve: false });
    try {
      const rows = await stores.sql`select id, properties from events order by id`;
      assert.deepEqual(rows.map((r) => [r.id, r.properties]), [
        [good.id, {}],
        [poison.id, { title: "ab" }],
      ]);
    } finally {
      await stores.close();
    }
  });
});

Deno.test("cli: usage prints a brand's request counts per day and route family", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(["brand", "create", "--name", "U", "--shop", "u.myshopify.com"], env),
    );
    const kv = await Deno.openKv(loadConfig(env).kvPath);
    const counts: [string, string, bigint][] = [
      ["2026-11-19", "events", 5n],
      ["2026-11-20", "events", 7n],
      ["2026-11-20", "keys", 1n],
      ["2026-11-21", "events", 2n],
    ];
    for (const [day, family, n] of counts) {
      await kv.atomic().sum(usageDailyKey(String(brand.id), day, family), n).commit();
    }
    await kv.atomic().sum(usageDailyKey("another_brand", "2026-11-20", "events"), 100n).commit();
    kv.close();

    const all = json(await runCli(["usage", "--brand", String(brand.id)], env));
    assert.equal(all.total, 15);
    assert.equal((all.days as unknown[]).length, 4);
    const window = json(
      await runCli([
        "usage",
        "--brand",
        String(brand.id),
        "--from",
        "2026-11-20",
        "--to",
        "2026-11-20",
      ], env),
    );
    assert.deepEqual(window, {
      brand: brand.id,
      from: "2026-11-20",
      to: "2026-11-20",
      total: 8,
      days: [
        { day: "2026-11-20", family: "events", requests: 7 },
        { day: "2026-11-20", family: "keys", requests: 1 },
      ],
      privacy_dropped: [],
    });
    const bad = await runCli(["usage", "--brand", String(brand.id), "--from", "20/11/2026"], env);
    assert.equal(bad.code, 2);
    assert.equal((await runCli(["usage", "--brand", MISSING], env)).code, 1);
  });
});

Deno.test("cli: orders import reads a file or stdin, reports per-line errors, and is idempotent", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(
        ["brand", "create", "--name", "Imp", "--shop", "imp.myshopify.com", "--beta"],
        env,
      ),
    );
    const line = (id: string, total: string) =>
      JSON.stringify({
        external_id: id,
        number: `#${id}`,
        state: "complete",
        billing_status: "complete",
        total,
        currency_code: "USD",
        created_at: "2026-01-02T03:04:05Z",
        customer: { email: "Bob@Example.com" },
      });
    const file = await Deno.makeTempFile({ suffix: ".ndjson" });
    await Deno.writeTextFile(
      file,
      [line("1", "10.00"), "oops", line("2", "20.5")].join("\n") + "\n",
    );
    assert.deepEqual(
      json(await runCli(["orders", "import", "--brand", String(brand.id), file], env)),
      {
        imported: 2,
        rejected: [{ line: 2, errors: ["not valid JSON"] }],
      },
    );
    assert.deepEqual(
      json(await runCli(["orders", "import", "--brand", String(brand.id), file], env)),
      {
        imported: 2,
        rejected: [{ line: 2, errors: ["not valid JSON"] }],
      },
    );
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--unstable-kv",
        `${ROOT}admin.ts`,
        "subscriptions",
        "import",
        "--brand",
        String(brand.id),
        "-",
      ],
      env,
      cwd: ROOT,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(
      new TextEncoder().encode(
        JSON.stringify({
          external_id: "s1",
          status: "active",
          customer: { email: "bob@example.com" },
        }) + "\n",
      ),
    );
    await writer.close();
    const out = await child.output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.deepEqual(JSON.parse(new TextDecoder().decode(out.stdout)), {
      imported: 1,
      rejected: [],
    });
    const stores = await openStores(loadConfig(env), { serve: false });
    try {
      const rows = await stores
        .sql`select external_id, total::text from orders order by external_id`;
      assert.deepEqual([...rows], [{ external_id: "1", total: "10.00" }, {
        external_id: "2",
        total: "20.50",
      }]);
      const [contacts] = await stores.sql`select count(*)::int as n from contacts`;
      assert.equal(contacts!.n, 1);
    } finally {
      await stores.close();
      await Deno.remove(file);
    }
  });
});

Deno.test("cli: --help on every command prints its usage and exits 0 without opening stores", async () => {
  // No store is reachable here: help must not need one.
  const env = { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", DATA_DIR: "/nonexistent" };
  for (const [name, command] of Object.entries(COMMANDS)) {
    for (const argv of [[...name.split(" "), "--help"], ["help", ...name.split(" ")]]) {
      const result = await runCli(argv, env);
      assert.equal(result.code, 0, `${argv.join(" ")}: ${result.stderr}`);
      assert.equal(result.stderr, "");
      assert.ok(
        result.stdout.startsWith(`Usage: deno task admin ${name} ${command.usage}`.trimEnd()),
        result.stdout,
      );
      assert.ok(result.stdout.includes(command.summary), result.stdout);
    }
  }
  const all = await runCli(["--help"], env);
  assert.equal(all.code, 0);
  const lines = all.stdout.split("\n");
  for (const name of Object.keys(COMMANDS)) {
    assert.ok(lines.some((line) => `${line} `.startsWith(`  ${name} `)), name);
  }
});

Deno.test("cli: brand list and show, key list and revoke (a revoked key stops authenticating)", async () => {
  await withStores(async (env) => {
    assert.deepEqual(json(await runCli(["brand", "list"], env)), { brands: [] });
    const acme = json(
      await runCli(["brand", "create", "--name", "Acme", "--shop", "acme.myshopify.com"], env),
    );
    const bare = json(await runCli(["brand", "create", "--name", "Bare", "--beta"], env));
    const listed = json(await runCli(["brand", "list"], env)).brands as Record<string, unknown>[];
    assert.deepEqual(listed.map(({ created_at: _, ...rest }) => rest), [
      {
        id: acme.id,
        name: "Acme",
        shop: "acme.myshopify.com",
        beta: false,
        integration: "connected",
        redacted_at: null,
      },
      { id: bare.id, name: "Bare", shop: null, beta: true, integration: null, redacted_at: null },
    ]);
    assert.ok(listed.every((brand) => !Number.isNaN(Date.parse(String(brand.created_at)))));

    const first = json(
      await runCli(["key", "issue", "--brand", String(acme.id), "--name", "a"], env),
    );
    const second = json(await runCli(["key", "issue", "--brand", String(acme.id)], env));
    const keys = json(await runCli(["key", "list", "--brand", String(acme.id)], env));
    assert.equal(keys.brand, acme.id);
    const records = keys.keys as Record<string, unknown>[];
    assert.deepEqual(records.map((k) => [k.id, k.name, k.prefix, k.revoked_at]), [
      [first.id, "a", first.prefix, null],
      [second.id, null, second.prefix, null],
    ]);
    // Metadata only: no plaintext and no hash anywhere in the output.
    assert.ok(!JSON.stringify(keys).includes(String(first.key)));
    assert.deepEqual(
      Object.keys(records[0]!).sort(),
      ["created_at", "expires_at", "id", "last_used_at", "name", "prefix", "revoked_at"],
    );
    assert.deepEqual(json(await runCli(["key", "list", "--brand", String(bare.id)], env)), {
      brand: bare.id,
      keys: [],
    });

    const revoked = json(
      await runCli(["key", "revoke", "--brand", String(acme.id), "--id", String(first.id)], env),
    );
    assert.equal(revoked.id, first.id);
    assert.ok(typeof revoked.revoked_at === "string");
    // Idempotent, as POST /cdp/keys/revoke: the same record again.
    assert.deepEqual(
      json(
        await runCli(["key", "revoke", "--brand", String(acme.id), "--id", String(first.id)], env),
      ),
      revoked,
    );
    // Another brand's key is no key of this brand.
    const elsewhere = await runCli(
      ["key", "revoke", "--brand", String(bare.id), "--id", String(second.id)],
      env,
    );
    assert.equal(elsewhere.code, 1);
    assert.match(elsewhere.stderr, /has no key/);

    const shown = json(await runCli(["brand", "show", "--brand", String(acme.id)], env));
    assert.deepEqual(shown, { ...listed[0], keys: { total: 2, live: 1 } });
    const missing = await runCli(["brand", "show", "--brand", MISSING], env);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no brand/);

    const stores = await openStores(loadConfig(env), { serve: false });
    try {
      const deps = { kv: stores.kv, now: () => new Date() };
      assert.equal(await authenticateApiKey(deps, String(first.key)), null);
      assert.equal((await authenticateApiKey(deps, String(second.key)))?.id, second.id);
    } finally {
      await stores.close();
    }
  });
});

Deno.test("cli: migrate applies what the database lacks and prints it; then nothing", async () => {
  await withStores(async (env) => {
    if (DATABASE_URL) {
      // A fresh server database is a copy of the migrated template: empty it first.
      const stores = await openStores(loadConfig(env), { serve: false, migrate: false });
      try {
        await stores.sql.unsafe("drop schema public cascade; create schema public");
      } finally {
        await stores.close();
      }
    }
    const last = MIGRATIONS.at(-1)!.version;
    assert.deepEqual(json(await runCli(["migrate"], env)), {
      applied: MIGRATIONS.map((m) => ({ version: m.version, name: m.name })),
      version: last,
    });
    assert.deepEqual(json(await runCli(["migrate"], env)), { applied: [], version: last });
  });
});

Deno.test("cli: --progress reports objects read and their rate on stderr while an import runs", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(["brand", "create", "--name", "P", "--shop", "p.myshopify.com", "--beta"], env),
    );
    const file = await Deno.makeTempFile({ suffix: ".ndjson" });
    const lines = Array.from(
      { length: 50 },
      (_, i) =>
        JSON.stringify({
          external_id: `s${i}`,
          status: "active",
          customer: { email: `c${i}@x.io` },
        }),
    );
    await Deno.writeTextFile(file, lines.join("\n") + "\n\n");
    try {
      const args = ["subscriptions", "import", "--brand", String(brand.id), file];
      const quiet = await runCli(args, env);
      assert.equal(quiet.stderr, "", "no progress unless asked for or on a terminal");
      const result = await runCli([...args, "--progress"], env);
      assert.deepEqual(json(result), { imported: 50, rejected: [] });
      const reports = result.stderr.trim().split("\n");
      assert.match(reports.at(-1)!, /^50 objects read \(\d+\/s, 0\.0 MB\), done$/);
    } finally {
      await Deno.remove(file);
    }
  });
});
