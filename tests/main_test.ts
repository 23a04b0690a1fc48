/**
 * main.ts as a process: under Deno Deploy's permissions against PostgreSQL, and its start-up
 * failures.
 */
import assert from "node:assert/strict";
import { DATABASE_URL, eventually, freshDatabase } from "./test_support.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const ADMIN = new URL("../admin.ts", import.meta.url).pathname;
// Deno Deploy runs the entrypoint with these only: no write, run, ffi or sys.
const DEPLOY_PERMISSIONS = ["--allow-net", "--allow-env", "--allow-read"];
// Unset in the children whatever the test's own environment holds (empty means unset).
const CLEAN_ENV = { DATA_DIR: "", KV_PATH: "", INGEST_QUEUE: "", FORWARDER: "", MIGRATE: "" };

/** A child process's output, line by line, as it comes. */
function lineReader(stream: ReadableStream<Uint8Array>) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const lines: string[] = [];
  return {
    lines,
    /** Reads until a line satisfies `match`; returns it. */
    async waitFor(match: (line: string) => boolean): Promise<string> {
      for (;;) {
        const found = lines.find(match);
        if (found) return found;
        const { value, done } = await reader.read();
        if (done) throw new Error(`the process ended first; its output:\n${lines.join("\n")}`);
        buffer += value;
        const parts = buffer.split("\n");
        buffer = parts.pop()!;
        lines.push(...parts);
      }
    },
    async rest(): Promise<string[]> {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
      }
      return [...lines, ...buffer.split("\n")].filter((line) => line !== "");
    },
  };
}

async function cli(location: string, env: Record<string, string>, args: string[]) {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--location", location, ADMIN, ...args],
    env,
  }).output();
  const stdout = new TextDecoder().decode(output.stdout);
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  return JSON.parse(stdout);
}

// Deno keeps a location's default KV database under DENO_DIR/location_data/<sha256(origin)>.
async function removeLocationData(location: string): Promise<void> {
  const info = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  const { denoDir } = JSON.parse(new TextDecoder().decode(info.stdout));
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(new URL(location).origin),
  );
  const hash = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  await Deno.remove(`${denoDir}/location_data/${hash}`, { recursive: true }).catch(() => {});
}

Deno.test({
  name: "main: with Deploy's permissions and the default KV, it ingests, forwards and reads",
  // Deno Deploy runs against a PostgreSQL server: embedded PGlite needs a writable directory.
  ignore: !DATABASE_URL,
}, async () => {
  const database = await freshDatabase();
  // A location of its own: the service and the CLI share its default KV database, and no other
  // test's.
  const location = `http://cdp-${crypto.randomUUID()}.test`;
  const env = { ...CLEAN_ENV, DATABASE_URL: database.url!, PORT: "0" };
  try {
    const brand = await cli(location, env, [
      "brand",
      "create",
      "--name",
      "Acme",
      "--shop",
      "acme.myshopify.com",
    ]);
    const { key } = await cli(location, env, ["key", "issue", "--brand", brand.id]);

    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...DEPLOY_PERMISSIONS, "--location", location, MAIN],
      env,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stdout = lineReader(child.stdout);
    const stderr = child.stderr.pipeThrough(new TextDecoderStream());
    let exited = false;
    try {
      const listening = JSON.parse(await stdout.waitFor((l) => l.includes('"listening"')));
      assert.equal(listening.kv, "default");
      assert.equal(listening.ingestQueue, "outbox");
      const base = listening.url as string;
      const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };
      const accepted = await fetch(`${base}/cdp/events`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          events: [{
            eventType: "updateProperties",
            profileId: "store_acme_1",
            properties: { update: { "properties.email": "bob@example.com" } },
          }],
        }),
      });
      assert.equal(accepted.status, 202, await accepted.text());
      // Applied by the forwarder, through the outbox, after the answer.
      let profile: { profile?: { properties?: { email?: string } } } = {};
      await eventually(async () => {
        const read = await fetch(`${base}/cdp/profiles/store_acme_1`, { headers });
        profile = await read.json();
        return read.status === 200;
      });
      assert.equal(profile.profile?.properties?.email, "bob@example.com");
      assert.equal((await fetch(`${base}/readyz`)).status, 200);

      child.kill("SIGTERM");
      const status = await child.status;
      exited = true;
      assert.equal(status.code, 0);
      const lines = await stdout.rest();
      const requests = lines.map((line) => JSON.parse(line)).filter((l) => l.message === "request");
      const ingest = requests.find((l) => l.route === "/cdp/events");
      assert.deepEqual(
        { ...ingest, duration_ms: 0, request_id: "" },
        {
          level: "info",
          message: "request",
          method: "POST",
          route: "/cdp/events",
          status: 202,
          duration_ms: 0,
          request_id: "",
          brand_id: brand.id,
        },
      );
      assert.ok(requests.some((l) => l.route === "/cdp/profiles/:id" && l.status === 200));
      assert.ok(!lines.some((line) => line.includes(key)), "the key is never logged");
    } finally {
      if (!exited) {
        child.kill("SIGKILL");
        await child.status;
      }
      await stderr.pipeTo(new WritableStream());
    }
  } finally {
    await removeLocationData(location);
    await database.close();
  }
});

Deno.test("main: a start-up failure is one JSON line naming the variable, and status 1", async () => {
  const cases: [Record<string, string>, Record<string, unknown>][] = [
    [{ PORT: "eighty" }, { variables: ["PORT"] }],
    [
      // Nothing listens on port 1.
      { DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" },
      { store: "database", variable: "DATABASE_URL" },
    ],
  ];
  for (const [vars, named] of cases) {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", ...DEPLOY_PERMISSIONS, MAIN],
      env: { ...CLEAN_ENV, DATABASE_URL: "", ...vars },
    }).output();
    assert.equal(output.code, 1);
    const lines = new TextDecoder().decode(output.stderr).trim().split("\n");
    assert.equal(lines.length, 1, lines.join("\n"));
    const line = JSON.parse(lines[0]!);
    assert.equal(line.message, "start-up failed");
    assert.match(line.error, /\S/);
    for (const [field, value] of Object.entries(named)) assert.deepEqual(line[field], value);
  }
});
