/**
 * Connection failures that reach no handler. When PostgreSQL goes away mid-write, the driver's
 * socket (Deno's `node:net`) can reject a promise of its own that nobody awaits, with the same
 * failure the driver already gave the queries that used the connection (`ECONNRESET`, `EPIPE`,
 * `CONNECTION_CLOSED`). Deno ends a process on an unhandled rejection, which would turn a
 * database restart into a service outage. Every operation that needs the database has its own
 * failure path (a 503, a retried queue message), so such a stray failure is logged and the
 * process goes on; any other unhandled rejection still ends it.
 *
 * @module
 */
import { log } from "../log.ts";
import { databaseFailure } from "./db.ts";

/**
 * Keeps database connection failures that reach no handler from ending the process: each is
 * reported to `warn` (by default a warning in the log, the same line from every process)
 * instead; any other unhandled rejection is left alone. Answers the function that removes the
 * guard.
 */
export function guardStrayConnectionFailures(
  warn: (error: string) => void = (error) =>
    log("warn", "database connection failure reached no handler; the process goes on", { error }),
): () => void {
  const listener = (event: PromiseRejectionEvent) => {
    const failure = databaseFailure(event.reason);
    if (failure !== "lost" && failure !== "unreachable") return;
    event.preventDefault();
    warn(String(event.reason));
  };
  globalThis.addEventListener("unhandledrejection", listener);
  return () => globalThis.removeEventListener("unhandledrejection", listener);
}
