/**
 * `deno task dev`: runs `deno <arguments>` (the service, with its declared permissions) and runs
 * it again when a source file changes. SIGTERM or SIGINT is passed on and ends both processes
 * once the service has shut down, with its exit status. Deno's own `--watch` runs the service in
 * its own process and keeps watching after the service exits on a signal, so a process manager's
 * or an editor's SIGTERM left it running (docs/operations.md).
 *
 * @module
 */
import { log } from "./lib/log.ts";

// Everything the service's code is under; tests, docs and data are not.
const _WATCHED = ["main.ts", "lib", "routes", "workers"].map((path) =>
  new URL(path, import.meta.url).pathname
);
// An editor's save is several events; one restart after they settle.
const _SETTLE_MS = 100;

let child: Deno.ChildProcess | null = null;
// The last status of a stopped service, awaited before the runner itself ends.
let stopped: Promise<Deno.CommandStatus | null> = Promise.resolve(null);
let stopping = false;

function start(): void {
  child = new Deno.Command(Deno.execPath(), { args: Deno.args }).spawn();
}

function stop(): Promise<Deno.CommandStatus | null> {
  const running = child;
  child = null;
  if (running) {
    try {
      running.kill("SIGTERM");
    } catch { /* it had exited already */ }
    stopped = running.status;
  }
  return stopped;
}

async function end(): Promise<void> {
  if (stopping) return;
  stopping = true;
  const status = await stop();
  Deno.exit(status?.code ?? 0);
}

Deno.addSignalListener("SIGINT", end);
Deno.addSignalListener("SIGTERM", end);
start();

let timer: ReturnType<typeof setTimeout> | undefined;
for await (const event of Deno.watchFs(_WATCHED)) {
  if (stopping) break;
  if (!event.paths.some((path) => path.endsWith(".ts"))) continue;
  clearTimeout(timer);
  timer = setTimeout(async () => {
    log("info", "source changed; restarting", { path: event.paths[0] });
    await stop();
    if (!stopping) start();
  }, _SETTLE_MS);
}
