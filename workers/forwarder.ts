/**
 * `deno task worker`: a forwarder process of its own, beside a service run with FORWARDER=off.
 *
 * @module
 */
import { log, setLogLevel } from "../lib/log.ts";
import { failStart, loadConfigOrFail } from "../lib/start_failure.ts";
import { openRuntime } from "../lib/runtime/runtime.ts";
import { guardStrayConnectionFailures } from "../lib/store/stray_failures.ts";

// A delivery waiting for the database must not hold the process: it ends within this.
const _SHUTDOWN_MS = 10_000;

// A database restart can leave the driver's socket rejecting a promise nobody awaits.
guardStrayConnectionFailures();

const config = loadConfigOrFail(Deno.env.toObject());
setLogLevel(config.logLevel);
// Serving: when the worker starts first it owns the embedded database and the service connects
// to it, so the engine's work stays off the service's event loop.
const runtime = await openRuntime(config, { serve: true }).catch(failStart);
// Deno KV's queue wakes a listener only for its own process's enqueues: the worker has it woken
// (the outbox is polled and ignores this).
const running = runtime.startForwarder({ wakeMs: 250 });
log("info", "forwarder running", {
  database: runtime.database.mode,
  concurrency: config.forwarderConcurrency,
  ingestQueue: config.ingestQueue,
});

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  setTimeout(() => Deno.exit(1), _SHUTDOWN_MS);
  // A message being applied is redelivered at the next start.
  await runtime.close();
  await running.catch(() => {});
  Deno.exit(0);
}
Deno.addSignalListener("SIGINT", shutdown);
Deno.addSignalListener("SIGTERM", shutdown);
await running;
