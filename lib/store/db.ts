/**
 * Postgres access: the one SQL driver, connecting (server or embedded PGlite), and the
 * classification of database failures.
 *
 * @module
 */
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

/**
 * What a database failure means for its caller: `unreachable` (no connection could be made:
 * refused, timed out, the server starting or full; it cannot have been caused by the statement,
 * so waiting for the server is safe), `lost` (the connection broke or the server is shutting
 * down: retry), `timeout` (statement_timeout cancelled it), `data` (the database refuses a value:
 * SQLSTATE class 22, a not-null or check violation, a program limit such as a value too large to
 * index; no retry mends it), or null for anything else. Unique and foreign-key violations are
 * not `data`: a concurrent transaction can cause them, and a retry then works.
 */
export function databaseFailure(err: unknown): "unreachable" | "lost" | "timeout" | "data" | null {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== "string") return null;
  if (_UNREACHABLE.has(code)) return "unreachable";
  if (_LOST.has(code) || code.startsWith("08")) return "lost";
  if (code === "57014") return "timeout";
  if (/^22...$/.test(code) || code === "23502" || code === "23514" || code === "54000") {
    return "data";
  }
  return null;
}

// postgres.js and socket codes, and the server's start-up (57P03) and connection-limit codes.
const _UNREACHABLE = new Set([
  "ECONNREFUSED",
  "CONNECT_TIMEOUT",
  "ENOENT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "57P03",
  "53300",
]);

// Connections that broke, and the server's shutdown and crash codes (class 08 by prefix).
const _LOST = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "57P01",
  "57P02",
]);

/**
 * `value` as one JSON parameter of a statement (`jsonb_to_recordset(...)`, `::jsonb`): dates go as
 * their ISO text, as `JSON.stringify` writes them. postgres.js types `json()` for JSON values only,
 * which typed rows (interfaces without an index signature, Date fields) do not satisfy, so the one
 * cast lives here.
 */
export function jsonParam(sql: Sql | Tx, value: unknown): ReturnType<Sql["json"]> {
  return sql.json(value as never);
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
  /**
   * Apply the migrations to an embedded database this call creates, while creating it (faster
   * than through its socket afterwards). Off by default.
   */
  migrateNew?: boolean;
}

// Every connection: a connection attempt to a host that drops packets fails after 5 s instead of
// 30 s, and a lost connection is retried on the short backoff below.
const _POSTGRES_OPTIONS = {
  onnotice: () => {},
  connection: { application_name: "cdp" },
  backoff: reconnectBackoff,
  connect_timeout: 5,
};

// PGlite's one user, named: the driver would otherwise ask the OS for the user name, which
// needs a permission (--allow-sys) the service does not otherwise take.
const _EMBEDDED_OPTIONS = { ..._POSTGRES_OPTIONS, user: "postgres" };

/**
 * Opens Postgres from `databaseUrl`, else the embedded PGlite under `dataDir/pg`.
 *
 * Embedded mode elects one owner per data directory with an OS file lock (`dataDir/pg.lock`,
 * released by the kernel if the owner dies). The owner opens PGlite; if it serves, it listens on
 * a Unix socket (lib/store/pglite_server.ts) and every other process (a CLI command in a second
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
        const sql = postgres({ ..._EMBEDDED_OPTIONS, path: socketPath, max: options.max ?? 1 });
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
  return postgres(url, {
    ..._POSTGRES_OPTIONS,
    max,
    socket: _noDelaySocketFactory(),
  } as postgres.Options<Record<string, never>>);
}

/**
 * Seconds before the pool retries a connection after `retries` failures in a row: doubling from
 * 50 ms up to 1 s, with jitter. The driver's default grows to 20 s, so a query sent early in an
 * outage, or right after the server is back, waited that long for a connection.
 */
export function reconnectBackoff(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1);
}

/**
 * Connections to the server with Nagle's algorithm off. postgres.js leaves it on, so a small
 * message sent while an earlier one is unacknowledged waited for the server's delayed
 * acknowledgement, 40 ms on Linux: measured after every COPY of an import.
 *
 * The socket is returned before it connects: postgres.js 3.4.9 loses the pool slot for good when
 * a socket factory rejects (it reports the error but never marks the connection closed, so after
 * one refused connection per slot every query waits for ever). A socket that fails later emits
 * `error` and `close` like the driver's own, and the driver retries it with its backoff. Writes
 * made while it connects are buffered by the socket.
 */
function _noDelaySocketFactory(): (
  options: { host: string[]; port: number[]; path?: string | false },
) => Socket {
  // The hosts of a URL naming several, in turn, as postgres.js tries them.
  let attempt = 0;
  return (options) => {
    const i = attempt++ % options.host.length;
    const socket = options.path
      ? connect(options.path)
      : connect(options.port[i] ?? options.port[0]!, options.host[i]);
    socket.setNoDelay(true);
    return socket;
  };
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
  const sql = postgres({ ..._EMBEDDED_OPTIONS, path: socketPath, max });
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
  const { openPglite } = await import("./pglite_open.ts");
  const pglite = await openPglite(`${dataDir}/pg`, { migrate: options.migrateNew ?? false });
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
