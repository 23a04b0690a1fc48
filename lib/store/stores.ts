/**
 * Storage: the service's two stores. This group owns Postgres (db.ts; embedded PGlite served by
 * pglite_server.ts; the schema in migrations.ts; planner statistics in statistics.ts) and Deno
 * KV (kv_store.ts, the key space in kv_keys.ts, group commit in kv_group_commit.ts). This
 * module opens both from config and migrates. See docs/architecture.md.
 *
 * @module
 */
import type { Config } from "../config.ts";
import { type Database, openDatabase, type Sql } from "./db.ts";
import { openKv } from "./kv_store.ts";
import { migrate } from "./migrations.ts";

/** The two stores, opened and migrated. */
export interface Stores {
  kv: Deno.Kv;
  sql: Sql;
  database: Database;
  close(): Promise<void>;
}

/**
 * Opens Deno KV and Postgres (or embedded PGlite) from config and applies migrations (unless
 * `migrate` is false: the `migrate` command applies them itself, to report them).
 */
export async function openStores(
  config: Config,
  options: { serve: boolean; migrate?: boolean },
): Promise<Stores> {
  const isFilePath = config.kvPath !== ":memory:" && !/^https?:\/\//.test(config.kvPath);
  if (isFilePath) {
    const dir = config.kvPath.includes("/")
      ? config.kvPath.slice(0, config.kvPath.lastIndexOf("/"))
      : ".";
    await Deno.mkdir(dir || "/", { recursive: true });
  }
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    serve: options.serve,
  });
  let kv: Deno.Kv | undefined;
  try {
    kv = await openKv(config.kvPath);
    if (options.migrate !== false) await migrate(database.sql);
  } catch (err) {
    kv?.close();
    await database.close();
    throw err;
  }
  return {
    kv,
    sql: database.sql,
    database,
    async close() {
      kv.close();
      await database.close();
    },
  };
}
