/**
 * Start-up time: from spawning the process to the first answered request (GET /healthz, which
 * touches both stores). The floor is a bare `Deno.serve` process answering the same request.
 *
 *   deno bench -A --unstable-kv bench/startup_bench.ts
 */
const ROOT = new URL("../", import.meta.url).pathname;
const PG_URL = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";

const BARE_SERVER = `
  Deno.serve({ port: 0, onListen: ({ port }) =>
    console.log(JSON.stringify({ url: "http://localhost:" + port })) },
  () => Response.json({ status: "ok" }));
`;

/** Spawns a server, waits for its listening line, answers one request, and stops it. */
async function firstAnswer(args: string[], env: Record<string, string>): Promise<void> {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    env: { PORT: "0", ...env },
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    let seen = "";
    while (!seen.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`server exited before listening: ${seen}`);
      seen += value;
    }
    const { url } = JSON.parse(seen.split("\n")[0]!);
    const res = await fetch(`${url}/healthz`);
    if (res.status !== 200) throw new Error(`healthz answered ${res.status}`);
    await res.body?.cancel();
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await reader.cancel();
  }
}

const service = ["run", "-A", "--unstable-kv", "main.ts"];
const options = { n: 5, warmup: 1, group: "startup" };

Deno.bench("bare Deno.serve (floor)", { ...options, baseline: true }, async () => {
  await firstAnswer(["eval", BARE_SERVER], {});
});

Deno.bench("service, embedded PGlite, fresh data dir (initdb + migrate)", options, async () => {
  const dataDir = await Deno.makeTempDir();
  await firstAnswer(service, { DATA_DIR: dataDir, DATABASE_URL: "" });
  await Deno.remove(dataDir, { recursive: true });
});

const warmDir = await Deno.makeTempDir();
Deno.bench("service, embedded PGlite, existing data dir", options, async () => {
  await firstAnswer(service, { DATA_DIR: warmDir, DATABASE_URL: "" });
});

Deno.bench("service, PostgreSQL server", options, async () => {
  const dataDir = await Deno.makeTempDir();
  await firstAnswer(service, { DATA_DIR: dataDir, DATABASE_URL: PG_URL });
  await Deno.remove(dataDir, { recursive: true });
});
