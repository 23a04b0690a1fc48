import postgres from "postgres";
import { connect, type Socket } from "node:net";
import type { PGlite } from "@electric-sql/pglite";
import { startPgliteServer } from "./pglite_server.ts";

/** The one SQL driver every module uses. */
export type Sql = postgres.Sql;

/** A transaction handle of {@linkcode Sql}. */
export type Tx = postgres.TransactionSql;

/**
 * A value in COPY's text format: `\N` for null; backslash, newline, carriage return and tab
 * escaped, so a field never ends its column or row early.
 */
export function copyField(value: string | null): string {
  if (value === null) return "\\N";
  return _COPY_SPECIAL.test(value) ? value.replace(_COPY_SPECIAL_ALL, _copyEscape) : value;
}

const _COPY_SPECIAL = /[\\\n\r\t]/;
const _COPY_SPECIAL_ALL = /[\\\n\r\t]/g;
const _COPY_ESCAPES: Record<string, string> = {
  "\\": "\\\\",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};

function _copyEscape(char: string): string {
  return _COPY_ESCAPES[char]!;
}

/**
 * Sends `rows` (COPY's text format, one line a row) to the `copy ... from stdin` statement
 * `copy`, run in the transaction `tx`, and resolves once the server has taken them all; rejects
 * when it refuses any (the transaction is then aborted).
 *
 * PostgreSQL servers only: embedded PGlite's socket has no COPY.
 */
export async function copyIn(
  tx: Tx,
  copy: postgres.PendingQuery<postgres.Row[]>,
  rows: string,
): Promise<void> {
  const stream = await copy.writable();
  // postgres.js 3.4.9 never finishes the stream when the server refuses the rows after the end
  // of the data (porsager/postgres#1173): awaiting it would hang. So the answer is read from the
  // next statement of the transaction instead, which runs after the COPY and fails if the COPY
  // failed. The driver refuses any statement until it has sent the end of the data, which it
  // does in the stream's `_final`, hence the wrapper.
  const ended = new Promise<void>((resolve, reject) => {
    const final = stream._final.bind(stream);
    stream._final = (callback) => {
      final(callback);
      resolve();
    };
    // A refusal that arrives before the end of the data destroys the stream.
    stream.on("error", reject);
  });
  stream.end(rows);
  await ended;
  await tx`select 1`;
}

/** An open database: the `sql` tag plus how to close whatever was opened for it. */
export interface Database {
  sql: Sql;
  /** `postgres` (DATABASE_URL), `embedded-owner` (this process runs PGlite), `embedded-client`. */
  mode: "postgres" | "embedded-owner" | "embedded-client";
  close(): Promise<void>;
}

/** Options for {@linkcode openDatabase}. */
export interface OpenDatabaseOptions {
  databaseUrl?: string;
  dataDir: string;
  /**
   * Serve the embedded database on its socket when this process owns it. The service does; the
   * CLI does not, so a service started while a CLI command runs waits for the CLI and then owns
   * the database itself instead of depending on a short-lived process.
   */
  serve: boolean;
  /** How long to wait for another process's embedded database (ms). */
  waitMs?: number;
  /** Pool size for this process's connections. */
  max?: number;
}

const _POSTGRES_OPTIONS = { onnotice: () => {}, connection: { application_name: "cdp" } };

/**
 * Opens Postgres from `databaseUrl`, else the embedded PGlite under `dataDir/pg`.
 *
 * Embedded mode elects one owner per data directory with an OS file lock (`dataDir/pg.lock`,
 * released by the kernel if the owner dies). The owner opens PGlite; if it serves, it listens on
 * a Unix socket (lib/pglite_server.ts) and every other process (a CLI command in a second
 * terminal) connects through that socket with the same driver. Two processes never open the data directory at once.
 */
export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  if (options.databaseUrl) {
    const sql = connectPostgres(options.databaseUrl, options.max ?? 10);
    await sql`select 1`;
    return { sql, mode: "postgres", close: () => sql.end({ timeout: 5 }) };
  }
  await Deno.mkdir(options.dataDir, { recursive: true });
  const dataDir = await Deno.realPath(options.dataDir);
  const socketPath = embeddedSocketPath(dataDir);
  const lockFile = await Deno.open(`${dataDir}/pg.lock`, { create: true, write: true });
  const deadline = Date.now() + (options.waitMs ?? 30_000);
  try {
    while (true) {
      if (await lockFile.tryLock(true)) {
        return await _openOwner(dataDir, socketPath, lockFile, options);
      }
      if (await _socketAccepts(socketPath)) {
        lockFile.close();
        const sql = postgres({ ..._POSTGRES_OPTIONS, path: socketPath, max: options.max ?? 1 });
        await sql`select 1`;
        return { sql, mode: "embedded-client", close: () => sql.end({ timeout: 5 }) };
      }
      if (Date.now() > deadline) {
        throw new Error(
          `the embedded database in ${dataDir} is held by another process that does not serve it; ` +
            "retry when that command has finished",
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } catch (err) {
    try {
      lockFile.close();
    } catch { /* already closed by the owner path */ }
    throw err;
  }
}

/** The driver on a PostgreSQL server at `url`, with at most `max` connections. */
export function connectPostgres(url: string, max: number): Sql {
  // `socket` is documented ("Custom socket") but missing from the driver's option types.
  return postgres(url, { ..._POSTGRES_OPTIONS, max, socket: _noDelaySocket } as postgres.Options<
    Record<string, never>
  >);
}

/**
 * A connection to the server with Nagle's algorithm off. postgres.js leaves it on, so a small
 * message sent while an earlier one is unacknowledged waited for the server's delayed
 * acknowledgement, 40 ms on Linux: measured after every COPY of an import.
 */
async function _noDelaySocket(
  options: { host: string[]; port: number[]; path?: string | false },
): Promise<Socket> {
  let failure: unknown;
  // The hosts of a URL naming several, in order, as postgres.js tries them.
  for (let i = 0; i < (options.path ? 1 : options.host.length); i++) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const socket = options.path
          ? connect(options.path)
          : connect(options.port[i] ?? options.port[0]!, options.host[i]);
        socket.setNoDelay(true);
        socket.once("error", reject);
        socket.once("connect", () => {
          socket.off("error", reject);
          resolve(socket);
        });
      });
    } catch (err) {
      failure = err;
    }
  }
  throw failure;
}

/** The Unix socket of an embedded data directory (kept under the 107-byte sun_path limit). */
export function embeddedSocketPath(dataDir: string, name = "pg.sock"): string {
  const inside = `${dataDir}/${name}`;
  if (new TextEncoder().encode(inside).length <= 100) return inside;
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(inside)) hash = Math.imul(hash ^ byte, 0x01000193);
  return `/tmp/cdp-${(hash >>> 0).toString(16)}.sock`;
}

/** Serves a PGlite instance on a Unix socket and connects the driver to it. */
export async function servePglite(
  pglite: PGlite,
  socketPath: string,
  max = 4,
): Promise<{ sql: Sql; stop(): Promise<void> }> {
  await Deno.remove(socketPath).catch(() => {});
  const server = await startPgliteServer(pglite, socketPath);
  const sql = postgres({ ..._POSTGRES_OPTIONS, path: socketPath, max });
  return {
    sql,
    async stop() {
      await sql.end({ timeout: 5 });
      await server.close();
      await Deno.remove(socketPath).catch(() => {});
    },
  };
}

async function _openOwner(
  dataDir: string,
  socketPath: string,
  lockFile: Deno.FsFile,
  options: OpenDatabaseOptions,
): Promise<Database> {
  // Loaded on demand: a service on DATABASE_URL never pays for the embedded engine.
  const { PGlite } = await import("@electric-sql/pglite");
  const pglite = await PGlite.create({ dataDir: `${dataDir}/pg` });
  // A CLI owner talks to its PGlite through a private socket, so the driver stays the same, and
  // nobody else connects to a process that is about to exit.
  const { sql, stop } = options.serve
    ? await servePglite(pglite, socketPath, options.max ?? 4)
    : await servePglite(pglite, embeddedSocketPath(dataDir, `pg.${Deno.pid}.sock`), 1);
  return {
    sql,
    mode: "embedded-owner",
    async close() {
      await stop();
      await pglite.close();
      await lockFile.unlock().catch(() => {});
      lockFile.close();
    },
  };
}

async function _socketAccepts(path: string): Promise<boolean> {
  try {
    const conn = await Deno.connect({ transport: "unix", path });
    conn.close();
    return true;
  } catch {
    return false;
  }
}
