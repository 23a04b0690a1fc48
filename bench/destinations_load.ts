/**
 * `deno task bench:destinations`: the p95 from an event applied to its `segment.entered`
 * delivery received (issue 29's target: at most 5 s), through the service as it runs (`main.ts`
 * in a process of its own, embedded PGlite, or a fresh database on DATABASE_URL's server), a
 * brand with 20 segments and a destination of all of them, and a receiver in this process. Each
 * event qualifies a new profile for one segment; "applied" is the change's `at` (written by the
 * forwarder's membership hook in the apply's wake), "received" is when the receiver read the
 * POST. Also the p95 from the ingest request's 202. Beside it, the floor (destinations_floor.ts):
 * a bare process that notes an event and POSTs it on a timer of the same period.
 *
 * Knobs: BENCH_EVENTS (300), BENCH_RATE (events per second, 30), DESTINATION_POLL_MS (500).
 */
import postgres from "postgres";
import { intEnv, percentile, pumpLines, startBenchRun, stopChild } from "./bench_support.ts";

const _ROOT = new URL("../", import.meta.url).pathname;
const EVENTS = intEnv("BENCH_EVENTS", 300);
const RATE = intEnv("BENCH_RATE", 30);
const POLL_MS = intEnv("DESTINATION_POLL_MS", 500);
const TARGET_MS = 5_000;

const run = startBenchRun("destinations", 10 * 60_000);

interface _Arrival {
  profile: string;
  at: number;
  received: number;
}

function _startReceiver(): { url: string; arrivals: _Arrival[]; stop(): Promise<void> } {
  const arrivals: _Arrival[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const received = Date.now();
    const body = await req.json();
    for (const d of body.deliveries) {
      if (d.type === "segment.entered") {
        arrivals.push({ profile: d.profile.id, at: Date.parse(d.at), received });
      }
    }
    return new Response("ok");
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/hook`,
    arrivals,
    stop: () => server.shutdown(),
  };
}

async function _paced(
  count: number,
  send: (i: number) => Promise<void>,
): Promise<Map<number, number>> {
  const sentAt = new Map<number, number>();
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    inFlight.push(send(i).then(() => void sentAt.set(i, Date.now())));
  }
  await Promise.all(inFlight);
  return sentAt;
}

async function _waitFor(what: string, check: () => boolean, ms = 120_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function _cli(env: Record<string, string>, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", "admin.ts", ...args],
    cwd: _ROOT,
    env,
  }).output();
  if (out.code !== 0) throw new Error(new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

async function _freshDatabaseUrl(): Promise<string | undefined> {
  const url = Deno.env.get("DATABASE_URL");
  if (!url) return undefined;
  const name = `cdp_bench_dest_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  run.onCleanup(`drop ${name}`, async () => {
    const dropper = postgres(url, { max: 1, onnotice: () => {} });
    await dropper.unsafe(`drop database if exists ${name} with (force)`);
    await dropper.end();
  });
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function ours(): Promise<{ applied: number[]; accepted: number[] }> {
  const receiver = _startReceiver();
  run.onCleanup("receiver", receiver.stop);
  const dir = await run.tempDir("cdp-bench-dest-");
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const databaseUrl = await _freshDatabaseUrl();
  const env: Record<string, string> = {
    DATA_DIR: dir,
    KV_PATH: `${dir}/kv.sqlite3`,
    PORT: String(port),
    NO_COLOR: "1",
    LOG_LEVEL: "warn",
    DESTINATIONS_ALLOW_PRIVATE: "true",
    DESTINATION_POLL_MS: String(POLL_MS),
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
  };
  const brand = await _cli(env, [
    "brand",
    "create",
    "--name",
    "Bench",
    "--shop",
    "bench.myshopify.com",
  ]);
  const { key } = await _cli(env, ["key", "issue", "--brand", brand.id]);
  const service = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", "main.ts"],
    cwd: _ROOT,
    env,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  pumpLines(service.stdout, () => {});
  pumpLines(service.stderr, (line) => line.includes('"error"') && run.progress(line));
  run.onCleanup("service", () => stopChild(service));
  const base = `http://127.0.0.1:${port}`;
  const api = (path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  for (let up = false; !up;) {
    up = await api("/healthz").then((r) => (r.body?.cancel(), r.ok), () => false);
    if (!up) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const segments: string[] = [];
  for (let s = 0; s < 20; s++) {
    const res = await api("/cdp/segments", {
      name: `Tier ${s}`,
      condition: {
        type: "profilePropertyCondition",
        parameterValues: { propertyName: `properties.tier${s}`, comparisonOperator: "exists" },
      },
    });
    segments.push((await res.json()).id);
  }
  const created = await api("/cdp/destinations", {
    name: "Bench",
    type: "webhook",
    url: receiver.url,
    segments,
  });
  if (created.status !== 201) {
    throw new Error(`destination: ${created.status} ${await created.text()}`);
  }
  run.progress(`service up; sending ${EVENTS} events at ${RATE}/s`);
  const sentAt = await _paced(EVENTS, async (i) => {
    const res = await api("/cdp/events", {
      events: [{
        eventType: "updateProperties",
        profileId: `p${i}`,
        properties: { update: { [`properties.tier${i % 20}`]: 1 } },
      }],
    });
    if (res.status !== 202) throw new Error(`ingest: ${res.status} ${await res.text()}`);
    await res.body?.cancel();
  });
  await _waitFor("every entry received", () => receiver.arrivals.length >= EVENTS);
  const arrivals = receiver.arrivals;
  return {
    applied: arrivals.map((a) => a.received - a.at),
    accepted: arrivals.map((a) => a.received - sentAt.get(Number(a.profile.slice(1)))!),
  };
}

async function floor(): Promise<number[]> {
  const receiver = _startReceiver();
  run.onCleanup("floor receiver", receiver.stop);
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "bench/destinations_floor.ts", receiver.url, String(POLL_MS)],
    cwd: _ROOT,
    stdout: "piped",
  }).spawn();
  run.onCleanup("floor", () => stopChild(child));
  const port = await new Promise<string>((resolve) => pumpLines(child.stdout, resolve));
  await _paced(EVENTS, async (i) => {
    const res = await fetch(`http://127.0.0.1:${port}/event`, { method: "POST", body: `p${i}` });
    await res.body?.cancel();
  });
  await _waitFor("every floor entry received", () => receiver.arrivals.length >= EVENTS);
  return receiver.arrivals.map((a) => a.received - a.at);
}

try {
  const load = () =>
    new TextDecoder().decode(new Deno.Command("uptime").outputSync().stdout).trim();
  console.log(`load before: ${load()}`);
  const floorMs = await floor();
  const ourMs = await ours();
  const p95 = percentile(ourMs.applied, 95);
  const rows = [
    ["event applied -> segment.entered received", p95, percentile(floorMs, 95)],
    ["ingest 202 -> segment.entered received", percentile(ourMs.accepted, 95), NaN],
  ];
  console.log(
    `bench:destinations  events=${EVENTS} rate=${RATE}/s poll=${POLL_MS}ms segments=20 ` +
      `database=${Deno.env.get("DATABASE_URL") ? "server" : "embedded"}`,
  );
  for (const [what, ours, floorP95] of rows) {
    console.log(
      `  ${String(what).padEnd(44)} p95 ${Number(ours).toFixed(0).padStart(6)} ms` +
        (Number.isNaN(floorP95)
          ? ""
          : `   floor p95 ${Number(floorP95).toFixed(0).padStart(6)} ms`),
    );
  }
  console.log(`  target p95 <= ${TARGET_MS} ms: ${p95 <= TARGET_MS ? "PASS" : "FAIL"}`);
  console.log(`load after: ${load()}`);
  if (p95 > TARGET_MS) Deno.exitCode = 1;
} finally {
  await run.cleanupAll(15_000);
}
