/**
 * Opening embedded PGlite on a data directory: the settings every start gets, and the first start
 * of a directory that does not exist yet, whose initdb runs in a worker (pglite_init_worker.ts).
 *
 * @module
 */
import type { PGlite } from "@electric-sql/pglite";

/**
 * Server settings given to initdb (which writes them to postgresql.conf) and to every start (so a
 * directory made before they changed gets them too). PGlite's 128 MB of shared buffers live in
 * its WebAssembly memory, which is resident from the start and never returned: a development
 * database's working set fits a fraction of it, and the operating system caches the files behind.
 */
export const PGLITE_SETTINGS: readonly string[] = ["-c", "shared_buffers=16MB"];

/** Options for {@linkcode openPglite} and {@linkcode initialisePgliteDir}. */
export interface PgliteInitOptions {
  /** Apply the migrations (migrations.ts) to a directory this call creates, before it is opened. */
  migrate: boolean;
}

/**
 * Opens PGlite on `pgDir`, creating the directory first (in a worker) when it does not exist.
 */
export async function openPglite(pgDir: string, options: PgliteInitOptions): Promise<PGlite> {
  // Loaded on demand: a service on DATABASE_URL never pays for the embedded engine.
  const { PGlite } = await import("@electric-sql/pglite");
  if (!(await _exists(pgDir))) await initialisePgliteDir(pgDir, options);
  return await PGlite.create({
    dataDir: pgDir,
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS],
  });
}

/**
 * Creates the PGlite data directory `pgDir` (which must not exist): initdb and, if asked, the
 * migrations in memory, then the files written to `pgDir.init` and renamed to `pgDir`, so a start
 * cut short leaves no directory that looks initialised.
 *
 * It runs in a worker: initdb runs in WebAssembly instances of its own whose memory, hundreds of
 * MB, stays resident until the garbage collector finds them, and a worker's memory goes back when
 * it ends. In memory, initdb also skips the tar archive PGlite writes a new directory through, and
 * the migrations write no files one by one.
 */
export async function initialisePgliteDir(
  pgDir: string,
  options: PgliteInitOptions,
): Promise<void> {
  const worker = new Worker(new URL("./pglite_init_worker.ts", import.meta.url), {
    type: "module",
  });
  try {
    await new Promise<void>((resolve, reject) => {
      worker.onmessage = (event: MessageEvent<{ error?: string }>) => {
        if (event.data.error) reject(new Error(`creating ${pgDir} failed: ${event.data.error}`));
        else resolve();
      };
      worker.onerror = (event) => {
        event.preventDefault();
        reject(new Error(`creating ${pgDir} failed: ${event.message}`));
      };
      worker.postMessage({ pgDir, settings: PGLITE_SETTINGS, migrate: options.migrate });
    });
  } finally {
    worker.terminate();
  }
}

async function _exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}
