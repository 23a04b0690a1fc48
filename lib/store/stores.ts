/**
 * Storage: the service's two stores. This group owns Postgres (db.ts; embedded PGlite served by
 * pglite_server.ts; the schema in migrations.ts; planner statistics in statistics.ts) and Deno
 * KV (kv_store.ts, the key space in kv_keys.ts, group commit in kv_group_commit.ts). This
 * module opens both from config and migrates unless `MIGRATE=off`. See docs/architecture.md.
 *
 * @module
 */
import type { Config } from "../config.ts";
import { StoreOpenError } from "../errors.ts";
import { type Database, openDatabase, type Sql } from "./db.ts";
import { openKv } from "./kv_store.ts";
import { migrate } from "./migrations.ts";

// Defined in lib/errors.ts, so that lib/start_failure.ts names it without importing a store.
export { StoreOpenError };

/** The two stores, opened and migrated. */
export interface Stores {
  kv: Deno.Kv;
  sql: Sql;
  database: Database;
  /** Opens the KV file again: a second handle, for a local file only (`createKvQueue`'s `reopen`). */
  reopenKv?: () => Promise<Deno.Kv>;
  close(): Promise<void>;
}

/**
 * Opens Deno KV and Postgres (or embedded PGlite) from config and applies migrations (unless
 * `MIGRATE=off`, or `migrate: false` for the `migrate` command, which applies them itself to
 * report them); a failure is a {@linkcode StoreOpenError} naming the store and its variable.
 */
export async function openStores(
  config: Config,
  options: { serve: boolean; migrate?: boolean },
): Promise<Stores> {
  const migrating = config.migrate && options.migrate !== false;
  const database = await _openDatabase(config, { serve: options.serve, migrateNew: migrating });
  let kv: Deno.Kv | undefined;
  try {
    kv = await _openKv(config);
    if (migrating) {
      await migrate(database.sql).catch((err) => {
        throw new StoreOpenError("migrations", "MIGRATE", `migrations failed: ${err}`, {
          cause: err,
        });
      });
    }
    const opened = kv;
    const path = config.kvPath;
    return {
      kv: opened,
      sql: database.sql,
      database,
      reopenKv: _isLocalFile(path) ? () => openKv(path) : undefined,
      async close() {
        opened.close();
        await database.close();
      },
    };
  } catch (err) {
    kv?.close();
    await database.close();
    throw err;
  }
}

async function _openDatabase(
  config: Config,
  options: { serve: boolean; migrateNew: boolean },
): Promise<Database> {
  try {
    return await openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      serve: options.serve,
      migrateNew: options.migrateNew,
    });
  } catch (err) {
    const [variable, what] = config.databaseUrl
      ? ["DATABASE_URL", "the PostgreSQL server at DATABASE_URL is unreachable"]
      : ["DATA_DIR", `the embedded database under DATA_DIR (${config.dataDir}) cannot be opened`];
    throw new StoreOpenError("database", variable, `${what}: ${err}`, { cause: err });
  }
}

async function _openKv(config: Config): Promise<Deno.Kv> {
  const path = config.kvPath;
  try {
    if (_isLocalFile(path)) {
      const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
      await Deno.mkdir(dir || "/", { recursive: true });
    }
    return await openKv(path);
  } catch (err) {
    const where = path === undefined ? "the default Deno KV database" : `Deno KV at ${path}`;
    throw new StoreOpenError("kv", "KV_PATH", `${where} cannot be opened: ${err}`, { cause: err });
  }
}

/** Whether KV at `path` is a file on this machine (not `:memory:`, a KV Connect URL or the default). */
function _isLocalFile(path: string | undefined): path is string {
  return path !== undefined && path !== ":memory:" && !/^https?:\/\//.test(path);
}
