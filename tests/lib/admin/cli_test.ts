/** The operator CLI, run as a subprocess exactly as `deno task admin` runs it. */
import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { loadConfig } from "../../../lib/config.ts";
import { type EventsMessage, writeDeadLetter } from "../../../lib/ingest/queue.ts";
import { usageDailyKey } from "../../../lib/store/kv_keys.ts";
import { openStores } from "../../../lib/store/stores.ts";
import { json, ROOT, runCli, withStores } from "./cli_support.ts";

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
      [["brand", "set", "--brand", "x", "--beta", "maybe"], 2, /on or off/],
      [
        ["brand", "set", "--brand", "x", "--integration", "sideways"],
        2,
        /connected or disconnected/,
      ],
      [["frobnicate"], 2, /unknown command/],
      [["brand", "create", "--name", "X", "--shop", "example.com"], 1, /myshopify\.com/],
      [["brand", "set", "--brand", "missing", "--beta", "on"], 1, /no brand missing/],
      [["key", "issue", "--brand", "missing"], 1, /no brand missing/],
      [["orders", "import", "--brand", "x", "-"], 1, /no brand x/],
      [["orders", "import", "--brand", "x"], 2, /one FILE/],
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
    const service = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--unstable-kv", `${ROOT}main.ts`],
      env: { ...env, PORT: "0" },
      cwd: ROOT,
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const reader = service.stdout.pipeThrough(new TextDecoderStream()).getReader();
    try {
      let seen = "";
      while (!seen.includes("\n")) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`service exited: ${seen}`);
        seen += value;
      }
      const url = JSON.parse(seen.split("\n")[0]!).url as string;

      const brand = json(
        await runCli(["brand", "create", "--name", "Live", "--shop", "live.myshopify.com"], env),
      );
      const key = json(await runCli(["key", "issue", "--brand", String(brand.id)], env));
      const res = await fetch(`${url}/cdp/events/types`, {
        headers: { Authorization: `Bearer ${key.key}` },
      });
      assert.equal(res.status, 200);
      assert.equal((await res.json()).scope, "live.myshopify.com");
    } finally {
      service.kill("SIGTERM");
      assert.equal((await service.status).code, 0);
      await reader.cancel();
    }
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
    assert.deepEqual(json(await runCli(["deadletter", "list", "--brand", "other"], env)), {
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
    });
    const bad = await runCli(["usage", "--brand", String(brand.id), "--from", "20/11/2026"], env);
    assert.equal(bad.code, 2);
    assert.equal((await runCli(["usage", "--brand", "missing"], env)).code, 1);
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
