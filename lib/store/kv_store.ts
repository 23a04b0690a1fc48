/**
 * Opening Deno KV, with retries of operations a locked SQLite file refused.
 *
 * @module
 */
/**
 * Opening Deno KV for the service and the CLI. A local KV file is SQLite: when several
 * processes write it at once (the service and an operator command), an operation can fail with
 * "database is locked" instead of waiting. Such an operation changed nothing, so it is retried
 * here, with jitter, rather than at every call site.
 */

const _RETRIED = new Set<PropertyKey>(["get", "getMany", "set", "delete", "enqueue"]);

/** How many times an operation KV refused as locked is tried in all. */
export const LOCKED_ATTEMPTS = 40;

// Doubling from 5 ms to 250 ms, jittered: about six seconds in all. A file that several busy
// processes write at once can stay locked for longer than a fixed short pause allows.
function _pauseMs(attempt: number): number {
  return Math.min(250, 5 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
}

/**
 * Opens KV at `path` (a file, `:memory:` or a KV Connect URL; undefined: the platform's default
 * database) with busy retries.
 */
export async function openKv(path: string | undefined): Promise<Deno.Kv> {
  return withBusyRetry(await Deno.openKv(path));
}

/** Wraps a KV handle so that its operations retry while the database is locked. */
export function withBusyRetry(kv: Deno.Kv): Deno.Kv {
  return new Proxy(kv, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop === "atomic") return () => _retryingAtomic(target.atomic());
      if (typeof value !== "function") return value;
      if (_RETRIED.has(prop)) {
        return (...args: unknown[]) => retryWhileLocked(() => value.apply(target, args));
      }
      return value.bind(target);
    },
  });
}

/**
 * Runs `operation`, retrying while KV reports a lock ({@linkcode LOCKED_ATTEMPTS} tries in all,
 * `pauseMs(attempt)` apart: by default doubling from 5 to 250 ms, jittered).
 */
export async function retryWhileLocked<T>(
  operation: () => Promise<T>,
  pauseMs: (attempt: number) => number = _pauseMs,
): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await operation();
    } catch (err) {
      if (attempt >= LOCKED_ATTEMPTS || !String(err).includes("database is locked")) throw err;
      await new Promise((resolve) => setTimeout(resolve, pauseMs(attempt)));
    }
  }
}

function _retryingAtomic(op: Deno.AtomicOperation): Deno.AtomicOperation {
  const proxy: Deno.AtomicOperation = new Proxy(op, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      if (prop === "commit") return () => retryWhileLocked(() => target.commit());
      // Builder methods return the operation: keep returning the proxy so commit stays wrapped.
      return (...args: unknown[]) => {
        value.apply(target, args);
        return proxy;
      };
    },
  });
  return proxy;
}
