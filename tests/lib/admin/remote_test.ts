/** The CLI in remote mode (ADMIN_URL, ADMIN_TOKEN) against a service the test starts. */
import assert from "node:assert/strict";
import { createTestContext } from "../../test_support.ts";
import { json, runCli, withService, withStores } from "./cli_support.ts";

const TOKEN = "remote-admin-token-0123456789abcdefghijk";
// The remote CLI's own stores are unreachable: everything it does goes through the service.
const NO_STORES = { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", DATA_DIR: "/nonexistent" };

Deno.test("remote CLI: commands run on the service, print the same JSON, stream FILE inputs", async () => {
  await withStores(async (env) => {
    await withService({ ...env, ADMIN_TOKEN: TOKEN }, async (url) => {
      const remote = { ...NO_STORES, ADMIN_URL: url, ADMIN_TOKEN: TOKEN };
      const brand = json(
        await runCli(
          ["brand", "create", "--name", "Remote", "--shop", "remote.myshopify.com", "--beta"],
          remote,
        ),
      );
      const id = String(brand.id);
      const key = json(await runCli(["key", "issue", "--brand", id], remote));
      const res = await fetch(`${url}/cdp/events/types`, {
        headers: { Authorization: `Bearer ${key.key}` },
      });
      assert.equal(res.status, 200);
      await res.body?.cancel();

      // The same command, locally on the service's stores and remotely: the same output.
      for (const args of [["brand", "list"], ["key", "list", "--brand", id]]) {
        const local = await runCli(args, env);
        const over = await runCli(args, remote);
        assert.equal(over.code, 0, over.stderr);
        assert.equal(over.stdout, local.stdout, args.join(" "));
      }

      const line = (n: number) =>
        JSON.stringify({
          external_id: String(n),
          number: `#${n}`,
          state: "complete",
          billing_status: "complete",
          total: "10.00",
          currency_code: "USD",
          created_at: "2026-01-02T03:04:05Z",
          customer: { email: `c${n}@example.com` },
        });
      const file = await Deno.makeTempFile({ suffix: ".ndjson" });
      try {
        await Deno.writeTextFile(
          file,
          [...Array.from({ length: 30 }, (_, i) => line(i)), "oops"].join("\n") + "\n",
        );
        const imported = await runCli(
          ["orders", "import", "--brand", id, file, "--progress"],
          remote,
        );
        assert.deepEqual(json(imported), {
          imported: 30,
          rejected: [{ line: 31, errors: ["not valid JSON"] }],
        });
        // Progress counts what this machine sent.
        assert.match(imported.stderr.trim().split("\n").at(-1)!, /^31 objects read .*, done$/);
      } finally {
        await Deno.remove(file);
      }
      const piped = await runCli(
        ["subscriptions", "import", "--brand", id, "-"],
        remote,
        JSON.stringify({ external_id: "s1", status: "active" }) + "\n",
      );
      assert.deepEqual(json(piped), { imported: 1, rejected: [] });

      // Exit codes as locally: 2 for a bad command line (checked before any request), 1 else.
      const bad = await runCli(["usage", "--brand", id, "--from", "2026-13-01"], remote);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /calendar day/);
      const missing = await runCli(
        ["brand", "show", "--brand", "01M86TDT9CSKW28VQJZ3VT7SDR"],
        remote,
      );
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /^error: no brand 01M86TDT9CSKW28VQJZ3VT7SDR\n$/);
      const wrong = await runCli(["brand", "list"], { ...remote, ADMIN_TOKEN: `${TOKEN}x` });
      assert.equal(wrong.code, 1);
      assert.match(wrong.stderr, /invalid admin token/);
      assert.equal(wrong.stdout, "");
      const tokenless = await runCli(["brand", "list"], { ...NO_STORES, ADMIN_URL: url });
      assert.equal(tokenless.code, 2);
      assert.match(tokenless.stderr, /ADMIN_TOKEN is not/);
    });
  });
});

Deno.test("remote CLI: a service without ADMIN_TOKEN has no operator API", async () => {
  const ctx = await createTestContext();
  const server = Deno.serve({ port: 0, onListen: () => {} }, ctx.app.fetch);
  try {
    const result = await runCli(["brand", "list"], {
      ...NO_STORES,
      ADMIN_URL: `http://127.0.0.1:${server.addr.port}`,
      ADMIN_TOKEN: TOKEN,
    });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /has no operator API: is ADMIN_TOKEN set on the service\?/);
  } finally {
    await server.shutdown();
    await ctx.close();
  }
});
