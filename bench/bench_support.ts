/**
 * What the load benchmarks share: environment knobs, a progress log and a time bound per run,
 * timeouts, cleanups that always run, and percentiles.
 */

/** A positive integer from the environment, else `fallback`. */
export function intEnv(name: string, fallback: number): number {
  const raw = Deno.env.get(name);
  const value = raw ? Number(raw) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

/** Races `promise` against a timer that is always cleared. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The `p`th percentile (nearest rank) of `values`; NaN when there are none. */
export function percentile(values: ArrayLike<number>, p: number): number {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** One benchmark run: its progress log, its time bound, and its cleanups. */
export interface BenchRun {
  /** Logs `message` on stderr with the time since the run started. */
  progress(message: string): void;
  /** Milliseconds left before the run's bound. */
  leftMs(): number;
  /** Registers a cleanup (run in reverse order by `cleanupAll`); the returned function runs it now. */
  onCleanup(name: string, run: () => Promise<void>): () => Promise<void>;
  /** Runs every registered cleanup, each bounded by `timeoutMs`; failures are logged. */
  cleanupAll(timeoutMs: number): Promise<void>;
  /** A temporary directory removed at cleanup. */
  tempDir(prefix: string): Promise<string>;
}

/** Starts the clock of a run named `name` (the log's prefix), bounded by `limitMs`. */
export function startBenchRun(name: string, limitMs: number): BenchRun {
  const started = performance.now();
  const cleanups: { name: string; run: () => Promise<void> }[] = [];
  const run: BenchRun = {
    progress(message) {
      const t = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
      console.error(`[${name} ${t}s] ${message}`);
    },
    leftMs: () => limitMs - (performance.now() - started),
    onCleanup(cleanupName, cleanup) {
      const entry = { name: cleanupName, run: cleanup };
      cleanups.push(entry);
      return async () => {
        const index = cleanups.indexOf(entry);
        if (index >= 0) cleanups.splice(index, 1);
        await cleanup();
      };
    },
    async cleanupAll(timeoutMs) {
      while (cleanups.length > 0) {
        const entry = cleanups.pop()!;
        try {
          await withTimeout(entry.run(), timeoutMs, `cleanup ${entry.name}`);
        } catch (err) {
          console.error(`[${name}] cleanup ${entry.name} failed: ${err}`);
        }
      }
    },
    async tempDir(prefix) {
      const dir = await Deno.makeTempDir({ prefix });
      run.onCleanup(`remove ${dir}`, () => Deno.remove(dir, { recursive: true }).catch(() => {}));
      return dir;
    },
  };
  return run;
}

/** Reads a byte stream line by line until it ends. */
export function pumpLines(
  stream: ReadableStream<Uint8Array>,
  onLine: (line: string) => void,
): Promise<void> {
  return (async () => {
    let buffer = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      buffer += chunk;
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        onLine(buffer.slice(0, newline));
        buffer = buffer.slice(newline + 1);
      }
    }
    if (buffer) onLine(buffer);
  })().catch(() => {});
}

/** Stops a child process: SIGTERM, then SIGKILL when it has not exited within `graceMs`. */
export async function stopChild(child: Deno.ChildProcess, graceMs = 10_000): Promise<void> {
  try {
    child.kill("SIGTERM");
  } catch { /* already gone */ }
  try {
    await withTimeout(child.status, graceMs, "SIGTERM");
  } catch {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
  }
}
