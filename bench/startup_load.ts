/**
 * Start-up benchmark: time from spawning the service to its first answered `GET /healthz` (which
 * touches both stores), and its resident memory once idle (`VmRSS` of `/proc/<pid>/status`, a
 * few seconds after that answer), beside the floor: a bare `Deno.serve` process answering the
 * same request.
 *
 *   deno task bench:startup      (deno run -A --unstable-kv bench/startup_load.ts)
 *
 * Each round starts, in turn, the floor, the service on embedded PGlite with a fresh data
 * directory (initdb and migrations), the service on embedded PGlite with an existing data
 * directory (made by one start before the first round), and the service on PostgreSQL; the
 * figures are medians over the rounds. The embedded start's targets are reported PASS/FAIL:
 * fresh data directory up in under 3 s, idle RSS under 300 MB (fresh and existing directory).
 * The exit code is 1 only when a run fails.
 *
 * Prints progress on stderr, a markdown table and one JSON summary line on stdout.
 *
 * Environment (all optional): BENCH_RUNS (5: rounds), BENCH_IDLE_MS (3000: from the first answer
 * to the memory reading), BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test;
 * BENCH_POSTGRES=0 skips the PostgreSQL runs).
 */
import { intEnv, percentile, startBenchRun, withTimeout } from "./bench_support.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const PG_URL = Deno.env.get("BENCH_DATABASE_URL") ?? "postgres://postgres@127.0.0.1:5432/test";
const RUNS = intEnv("BENCH_RUNS", 5);
const IDLE_MS = intEnv("BENCH_IDLE_MS", 3000);
const WITH_POSTGRES = Deno.env.get("BENCH_POSTGRES") !== "0";

const START_TARGET_MS = 3000;
const RSS_TARGET_MB = 300;

const BARE_SERVER = `
  Deno.serve({ port: 0, onListen: ({ port }) =>
    console.log(JSON.stringify({ url: "http://localhost:" + port })) },
  () => Response.json({ status: "ok" }));
`;
const SERVICE = ["run", "-A", "--unstable-kv", "main.ts"];

/** One start: milliseconds to the first answer, idle and peak resident memory in MB. */
interface Start {
  startMs: number;
  rssMb: number;
  peakMb: number;
}

/** Spawns a server, times its first answer, reads its memory `IDLE_MS` later, and stops it. */
async function measureStart(args: string[], env: Record<string, string>): Promise<Start> {
  const started = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args,
    env: { PORT: "0", ...env },
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    const url = await withTimeout(_listeningUrl(lines), 120_000, "start");
    // The service logs before it listens; answer-ready is the first 200 from /healthz.
    while (true) {
      const res = await fetch(`${url}/healthz`);
      await res.body?.cancel();
      if (res.status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const startMs = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const status = await Deno.readTextFile(`/proc/${child.pid}/status`);
    return { startMs, rssMb: _statusMb(status, "VmRSS"), peakMb: _statusMb(status, "VmHWM") };
  } finally {
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    await child.status;
    await lines.cancel().catch(() => {});
  }
}

async function _listeningUrl(lines: ReadableStreamDefaultReader<string>): Promise<string> {
  let seen = "";
  while (true) {
    const { value, done } = await lines.read();
    if (done) throw new Error(`server exited before listening: ${seen}`);
    seen += value;
    const match = /"url":"(http:\/\/[^"]+)"/.exec(seen);
    if (match) {
      // Keep draining stdout so the child never blocks on a full pipe.
      (async () => {
        while (!(await lines.read().catch(() => ({ done: true }))).done) { /* discard */ }
      })();
      return match[1]!;
    }
  }
}

function _statusMb(status: string, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
  if (!match) throw new Error(`no ${field} in /proc/<pid>/status`);
  return Number(match[1]) / 1024;
}

function _loadAverage(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

const run = startBenchRun("startup", 30 * 60_000);
const kinds = [
  "floor",
  "fresh",
  "existing",
  ...(WITH_POSTGRES ? ["postgres"] : []),
] as const;
const labels: Record<string, string> = {
  floor: "bare `Deno.serve` (floor)",
  fresh: "service on embedded PGlite, fresh data dir (initdb + migrations)",
  existing: "service on embedded PGlite, existing data dir",
  postgres: "service on PostgreSQL",
};
const results: Record<string, Start[]> = Object.fromEntries(kinds.map((kind) => [kind, []]));

let exitCode = 0;
try {
  const loadBefore = _loadAverage();
  const warmDir = await run.tempDir("cdp-startup-existing-");
  run.progress(`making the existing data dir ${warmDir}`);
  await measureStart(SERVICE, { DATA_DIR: warmDir, DATABASE_URL: "" });
  for (let round = 1; round <= RUNS; round++) {
    for (const kind of kinds) {
      let start: Start;
      if (kind === "floor") {
        start = await measureStart(["eval", BARE_SERVER], {});
      } else if (kind === "existing") {
        start = await measureStart(SERVICE, { DATA_DIR: warmDir, DATABASE_URL: "" });
      } else {
        const dir = await Deno.makeTempDir({ prefix: `cdp-startup-${kind}-` });
        try {
          start = await measureStart(SERVICE, {
            DATA_DIR: dir,
            DATABASE_URL: kind === "postgres" ? PG_URL : "",
          });
        } finally {
          await Deno.remove(dir, { recursive: true }).catch(() => {});
        }
      }
      results[kind]!.push(start);
      run.progress(
        `round ${round} ${kind}: ${start.startMs.toFixed(0)} ms, ` +
          `RSS ${start.rssMb.toFixed(0)} MB (peak ${start.peakMb.toFixed(0)} MB)`,
      );
    }
  }
  const loadAfter = _loadAverage();

  const median = (values: number[]) => percentile(values, 50);
  const range = (values: number[], digits: number) =>
    `${Math.min(...values).toFixed(digits)} … ${Math.max(...values).toFixed(digits)}`;
  const summary: Record<string, unknown> = {};
  console.log(
    `\nStart-up, ${RUNS} alternated rounds (load average ${loadBefore} → ${loadAfter})\n`,
  );
  console.log(
    "| start | to first answer, median (min … max) | idle RSS MB, median (min … max) |" +
      " peak RSS MB, median |",
  );
  console.log("| --- | --- | --- | --- |");
  for (const kind of kinds) {
    const starts = results[kind]!;
    const ms = starts.map((s) => s.startMs);
    const rss = starts.map((s) => s.rssMb);
    const peak = starts.map((s) => s.peakMb);
    console.log(
      `| ${labels[kind]} | ${median(ms).toFixed(0)} ms (${range(ms, 0)}) | ` +
        `${median(rss).toFixed(0)} (${range(rss, 0)}) | ${median(peak).toFixed(0)} |`,
    );
    summary[kind] = {
      startMs: Math.round(median(ms)),
      rssMb: Math.round(median(rss)),
      peakMb: Math.round(median(peak)),
    };
  }
  const fresh = summary.fresh as { startMs: number; rssMb: number };
  const existing = summary.existing as { rssMb: number };
  const targets = {
    freshStart: fresh.startMs < START_TARGET_MS,
    idleRss: fresh.rssMb < RSS_TARGET_MB && existing.rssMb < RSS_TARGET_MB,
  };
  console.log(
    `\nembedded fresh start < ${START_TARGET_MS / 1000} s: ${
      targets.freshStart ? "PASS" : "FAIL"
    }` +
      ` (${fresh.startMs} ms)`,
  );
  console.log(
    `embedded idle RSS < ${RSS_TARGET_MB} MB: ${targets.idleRss ? "PASS" : "FAIL"}` +
      ` (fresh ${fresh.rssMb} MB, existing ${existing.rssMb} MB)`,
  );
  console.log(
    JSON.stringify({ bench: "startup", runs: RUNS, loadBefore, loadAfter, ...summary, targets }),
  );
} catch (err) {
  console.error(err);
  exitCode = 1;
} finally {
  await run.cleanupAll(10_000);
}
Deno.exit(exitCode);
