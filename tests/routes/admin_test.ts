/** The operator API (`/admin`): absent without ADMIN_TOKEN, guarded, and running every command. */
import { Validator } from "@seriousme/openapi-schema-validator";
import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { type EventsMessage, writeDeadLetter } from "../../lib/ingest/queue.ts";
import { MIGRATIONS } from "../../lib/store/migrations.ts";
import { authenticateApiKey } from "../../lib/tenancy/api_keys.ts";
import { errorBody, type TestContext, withContext } from "../test_support.ts";

const TOKEN = "test-admin-token-0123456789abcdefghijkl";
const ENV = { ADMIN_TOKEN: TOKEN };

/** Runs a command over HTTP: JSON arguments, or a FILE body with the arguments in a header. */
function command(
  ctx: TestContext,
  name: string,
  args: string[],
  options: { file?: string; token?: string | null } = {},
): Promise<Response> {
  const headers = new Headers();
  const token = options.token === undefined ? TOKEN : options.token;
  if (token !== null) headers.set("Authorization", `Bearer ${token}`);
  if (options.file === undefined) {
    headers.set("Content-Type", "application/json");
    return Promise.resolve(
      ctx.app.request(`/admin/commands/${name}`, {
        method: "POST",
        headers,
        body: JSON.stringify({ args }),
      }),
    );
  }
  headers.set("Content-Type", "application/octet-stream");
  headers.set("X-Admin-Args", encodeURIComponent(JSON.stringify(args)));
  return Promise.resolve(
    ctx.app.request(`/admin/commands/${name}`, { method: "POST", headers, body: options.file }),
  );
}

async function ok(res: Response): Promise<Record<string, unknown>> {
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body;
}

Deno.test("admin: without ADMIN_TOKEN the routes do not exist, nor in the document", async () => {
  await withContext(async (ctx) => {
    const res = await command(ctx, "brand-list", []);
    assert.equal(res.status, 404);
    assert.equal((await errorBody(res)).error, "not_found");
    const doc = await (await ctx.app.request("/openapi.json?admin=1")).json();
    assert.ok(Object.keys(doc.paths).every((path) => !path.startsWith("/admin")));
    assert.equal(doc.components.securitySchemes.adminToken, undefined);
  });
});

Deno.test("admin: a missing or wrong token is 401; the document shows /admin only when asked", async () => {
  await withContext(async (ctx) => {
    for (const token of [null, "wrong", `${TOKEN}x`, TOKEN.slice(0, -1)]) {
      const res = await command(ctx, "brand-list", [], { token });
      assert.equal(res.status, 401, String(token));
      assert.equal((await errorBody(res)).error, "unauthorized");
    }
    const malformed = await ctx.app.request("/admin/commands/brand-list", {
      method: "POST",
      headers: { Authorization: `Basic ${btoa(`admin:${TOKEN}`)}` },
    });
    assert.equal(malformed.status, 401);
    assert.deepEqual(await ok(await command(ctx, "brand-list", [])), { brands: [] });

    const publicDoc = await (await ctx.app.request("/openapi.json")).json();
    assert.ok(Object.keys(publicDoc.paths).every((path) => !path.startsWith("/admin")));
    assert.equal(publicDoc.components.securitySchemes.adminToken, undefined);
    const adminDoc = await (await ctx.app.request("/openapi.json?admin=1")).json();
    assert.deepEqual(await new Validator().validate(adminDoc), { valid: true });
    const operation = adminDoc.paths["/admin/commands/{name}"].post;
    assert.equal(operation.operationId, "runAdminCommand");
    assert.deepEqual(operation.security, [{ adminToken: [] }]);
    assert.ok(operation.parameters[0].schema.enum.includes("key-revoke"));
    assert.equal(adminDoc.components.securitySchemes.adminToken.scheme, "bearer");
  }, ENV);
});

Deno.test("admin: failed attempts are limited per client; the right token is never refused", async () => {
  await withContext(async (ctx) => {
    for (let i = 0; i < 3; i++) {
      assert.equal((await command(ctx, "brand-list", [], { token: "guess" })).status, 401);
    }
    const limited = await command(ctx, "brand-list", [], { token: "guess" });
    assert.equal(limited.status, 429);
    assert.equal((await errorBody(limited)).error, "rate_limited");
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    // Sixty guesses from the operator's own address do not lock the operator out.
    for (let i = 0; i < 60; i++) {
      await (await command(ctx, "brand-list", [], { token: "guess" })).body?.cancel();
    }
    assert.deepEqual(await ok(await command(ctx, "brand-list", [])), { brands: [] });
  }, { ...ENV, ADMIN_RATE_LIMIT_PER_MINUTE: "3" });
});

Deno.test("admin: behind the proxy, failures count per forwarded client, read from the right", async () => {
  await withContext(async (ctx) => {
    // Every request reaches the service from the proxy's one address (the socket's peer).
    const proxy = { remoteAddr: { hostname: "10.0.0.1", port: 40000, transport: "tcp" } };
    const from = (client: string, token: string, spoofed = "") =>
      ctx.app.request("/admin/commands/brand-list", {
        method: "POST",
        headers: {
          Authorization: `Bearer ${token}`,
          "Content-Type": "application/json",
          "X-Forwarded-For": `${spoofed}${client}`,
        },
        body: JSON.stringify({ args: [] }),
      }, proxy);
    // An attacker rotating the leftmost entry gets no fresh allowance...
    for (let i = 0; i < 3; i++) {
      assert.equal((await from("203.0.113.7", "guess", `192.0.2.${i}, `)).status, 401);
    }
    const limited = await from("203.0.113.7", "guess", "192.0.2.99, ");
    assert.equal(limited.status, 429);
    await limited.body?.cancel();
    // ...and cannot spend another client's by naming it on the left.
    for (let i = 0; i < 3; i++) {
      await (await from("203.0.113.7", "guess", "198.51.100.2, ")).body?.cancel();
    }
    const victim = await from("198.51.100.2", "guess");
    assert.equal(victim.status, 401);
    await victim.body?.cancel();
    // The operator passes, from anywhere, the attacker's address included.
    assert.equal((await from("203.0.113.7", TOKEN)).status, 200);
    assert.equal((await from("198.51.100.2", TOKEN)).status, 200);
  }, { ...ENV, ADMIN_RATE_LIMIT_PER_MINUTE: "3", TRUST_PROXY: "1" });
});

Deno.test("admin: brand and key commands run in the service and answer the CLI's JSON", async () => {
  await withContext(async (ctx) => {
    const brand = await ok(
      await command(ctx, "brand-create", ["--name", "Acme", "--shop", "acme.myshopify.com"]),
    );
    assert.deepEqual(Object.keys(brand).sort(), ["id", "name", "shop"]);
    const id = String(brand.id);
    assert.deepEqual(
      await ok(await command(ctx, "brand-set", ["--brand", id, "--beta", "on"])),
      {
        id,
        name: "Acme",
        shop: "acme.myshopify.com",
        beta: true,
        integration: "connected",
        redacted_at: null,
        event_retention_days: null,
      },
    );
    const listed = await ok(await command(ctx, "brand-list", []));
    assert.deepEqual((listed.brands as { id: string }[]).map((b) => b.id), [id]);

    const issued = await ok(await command(ctx, "key-issue", ["--brand", id, "--name", "ops"]));
    const { id: keyId, key } = issued as { id: string; key: string };
    const keys = await ok(await command(ctx, "key-list", ["--brand", id]));
    assert.deepEqual((keys.keys as { id: string; name: string }[]).map((k) => [k.id, k.name]), [
      [keyId, "ops"],
    ]);
    assert.equal((await ctx.request("/cdp/events/types", key)).status, 200);
    const revoked = await ok(await command(ctx, "key-revoke", ["--brand", id, "--id", keyId]));
    assert.equal(revoked.id, keyId);
    assert.equal(await authenticateApiKey(ctx.deps, key), null);
    assert.equal((await ctx.request("/cdp/events/types", key)).status, 401);

    const shown = await ok(await command(ctx, "brand-show", ["--brand", id]));
    assert.deepEqual(shown.keys, { total: 1, live: 0 });
    const usage = await ok(await command(ctx, "usage", ["--brand", id]));
    assert.equal(usage.brand, id);
    assert.equal(usage.total, 1);
    assert.deepEqual(await ok(await command(ctx, "migrate", [])), {
      applied: [],
      version: MIGRATIONS.at(-1)!.version,
    });
  }, ENV);
});

Deno.test("admin: failures keep their meaning: usage 400, missing 404, conflict 409", async () => {
  await withContext(async (ctx) => {
    const cases: [string, string[], number, string, RegExp][] = [
      ["usage", ["--brand", "x"], 400, "usage_error", /--brand takes a brand id/],
      [
        "usage",
        ["--brand", "01M86TDT9CSKW28VQJZ3VT7SDR", "--from", "2026-13-01"],
        400,
        "usage_error",
        /calendar day/,
      ],
      ["brand-create", [], 400, "usage_error", /--name is required.*usage: brand create/],
      ["brand-show", ["--brand", "01M86TDT9CSKW28VQJZ3VT7SDR"], 404, "not_found", /no brand/],
      ["brand-create", ["--name", "X", "--shop", "nope.com"], 400, "bad_request", /myshopify/],
      // A command that reads a FILE needs it as the body.
      [
        "orders-import",
        ["--brand", "01M86TDT9CSKW28VQJZ3VT7SDR", "-"],
        400,
        "usage_error",
        /application\/octet-stream/,
      ],
      ["frobnicate", [], 400, "bad_request", /param\.name/],
    ];
    for (const [name, args, status, code, message] of cases) {
      const res = await command(ctx, name, args);
      assert.equal(res.status, status, `${name} ${args.join(" ")}`);
      const body = await errorBody(res);
      assert.equal(body.error, code, `${name} ${args.join(" ")}`);
      assert.match(body.error_description, message);
    }
    await ok(await command(ctx, "brand-create", ["--name", "A", "--shop", "a.myshopify.com"]));
    const taken = await command(ctx, "brand-create", ["--name", "B", "--shop", "a.myshopify.com"]);
    assert.equal(taken.status, 409);
    const noFile = await command(ctx, "brand-list", [], { file: "x" });
    assert.equal(noFile.status, 400);
    assert.match((await errorBody(noFile)).error_description, /reads no file/);
  }, ENV);
});

Deno.test("admin: imports stream their FILE in the request body", async () => {
  await withContext(async (ctx) => {
    const { brandId } = await ctx.seedBrand();
    const line = (id: string) =>
      JSON.stringify({
        external_id: id,
        number: `#${id}`,
        state: "complete",
        billing_status: "complete",
        total: "10.00",
        currency_code: "USD",
        created_at: "2026-01-02T03:04:05Z",
        customer: { email: "bob@example.com" },
      });
    const file = [line("1"), "oops", line("2")].join("\n") + "\n";
    const args = ["--brand", brandId, "-"];
    assert.deepEqual(await ok(await command(ctx, "orders-import", args, { file })), {
      imported: 2,
      rejected: [{ line: 2, errors: ["not valid JSON"] }],
    });
    const subscription = JSON.stringify({ external_id: "s1", status: "active" }) + "\n";
    assert.deepEqual(
      await ok(await command(ctx, "subscriptions-import", args, { file: subscription })),
      { imported: 1, rejected: [] },
    );
    const [row] = await ctx.sql`select count(*)::int as n from orders`;
    assert.equal(row!.n, 2);
    const missing = await command(ctx, "orders-import", [
      "--brand",
      "01M86TDT9CSKW28VQJZ3VT7SDR",
      "-",
    ], {
      file,
    });
    assert.equal(missing.status, 404);
  }, ENV);
});

Deno.test("admin: deadletter list, show and replay --events with a FILE body", async () => {
  await withContext(async (ctx) => {
    const { brandId, scope } = await ctx.seedBrand();
    const newId = monotonicFactory();
    const poison = {
      id: newId(),
      eventType: "page_viewed",
      profileId: "dl_1",
      properties: { title: "a\u0000b" },
    };
    const message: EventsMessage = {
      kind: "events",
      id: newId(),
      brandId,
      batch: {
        scope: scope!,
        source: "server",
        receivedAt: "2026-11-21T12:00:00Z",
        events: [poison],
      },
    };
    await writeDeadLetter(ctx.kv, message, "retries exhausted", new Date("2026-11-21T12:00:01Z"));

    const listed = await ok(await command(ctx, "deadletter-list", ["--brand", brandId]));
    assert.deepEqual((listed.deadLetters as { id: string }[]).map((l) => l.id), [message.id]);
    const shown = await ok(await command(ctx, "deadletter-show", ["--id", message.id]));
    assert.deepEqual(shown.events, [poison]);

    const args = ["--id", message.id, "--events", "fixed.json"];
    const bad = await command(ctx, "deadletter-replay", args, { file: "[{" });
    assert.equal(bad.status, 422);
    assert.deepEqual(await errorBody(bad), {
      error: "command_failed",
      error_description: "the events are not valid JSON",
    });
    const fixed = JSON.stringify({
      ...shown,
      events: [{ ...poison, properties: { title: "ab" } }],
    });
    assert.deepEqual(await ok(await command(ctx, "deadletter-replay", args, { file: fixed })), {
      replayed: [{ id: message.id, applied: 1, failed: [] }],
    });
    assert.deepEqual(await ok(await command(ctx, "deadletter-list", [])), { deadLetters: [] });
    assert.deepEqual(await ok(await command(ctx, "deadletter-replay", ["--all"])), {
      replayed: [],
    });
  }, ENV);
});
