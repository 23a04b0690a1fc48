/**
 * The worker behind `initialisePgliteDir` (pglite_open.ts): given `{pgDir, settings, migrate}`,
 * runs initdb in an in-memory PGlite, applies the migrations if asked, stops it, writes its data
 * directory to disk, and answers `{}` or `{error}` (initdb or the writing failed).
 *
 * @module
 */
import { PGlite } from "@electric-sql/pglite";
import { embeddedSocketPath, servePglite } from "./db.ts";
import { migrate } from "./migrations.ts";

/** What the worker is asked. */
interface _Request {
  pgDir: string;
  settings: string[];
  migrate: boolean;
}

/** The part of Emscripten's file system API the copy reads. */
interface _MemoryFs {
  readdir(path: string): string[];
  stat(path: string): { mode: number };
  isDir(mode: number): boolean;
  readFile(path: string): Uint8Array;
}

/** The worker's global scope, as much of it as this module uses (type-checked as a window). */
interface _WorkerScope {
  onmessage: ((event: MessageEvent<_Request>) => void) | null;
  postMessage(message: { error?: string }): void;
}

const scope = self as unknown as _WorkerScope;
scope.onmessage = async (event) => {
  try {
    await _initialise(event.data);
    scope.postMessage({});
  } catch (err) {
    scope.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) });
  }
};

async function _initialise({ pgDir, settings, migrate: migrating }: _Request): Promise<void> {
  const pglite = await PGlite.create({
    initDbStartParams: settings,
    startParams: [...PGlite.defaultStartParams, ...settings],
  });
  if (migrating) {
    // Through the driver, as every other migration runs: on a private socket of this worker. A
    // failure leaves the directory unmigrated (the migrations run in one transaction), and the
    // owner's own migration run then reports it.
    const dataDir = pgDir.slice(0, pgDir.lastIndexOf("/"));
    const served = await servePglite(
      pglite,
      embeddedSocketPath(dataDir, `pg.init.${Deno.pid}.sock`),
      1,
    );
    try {
      await migrate(served.sql);
    } catch {
      /* reported by the owner's run */
    } finally {
      await served.stop();
    }
  }
  const fs = pglite.Module.FS as unknown as _MemoryFs;
  // A clean shutdown (its checkpoint written) before the copy: the first open needs no recovery.
  await pglite.close();
  const staging = `${pgDir}.init`;
  await Deno.remove(staging, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  _copyTree(fs, PGlite.paths.PGDATA, staging);
  await Deno.rename(staging, pgDir);
}

function _copyTree(fs: _MemoryFs, from: string, to: string): void {
  Deno.mkdirSync(to, { mode: 0o700 });
  for (const name of fs.readdir(from)) {
    if (name === "." || name === "..") continue;
    const source = `${from}/${name}`;
    if (fs.isDir(fs.stat(source).mode)) _copyTree(fs, source, `${to}/${name}`);
    else Deno.writeFileSync(`${to}/${name}`, fs.readFile(source), { mode: 0o600 });
  }
}
