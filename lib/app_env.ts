import type { BrandContext } from "./brands.ts";
import type { Config } from "./config.ts";
import type { Sql } from "./db.ts";
import type { Engine } from "./engine/engine.ts";
import type { ShopifyAdmin } from "./shopify/admin_client.ts";

/** Everything the app needs from outside, passed in so tests can swap stores and the clock. */
export interface AppDeps {
  kv: Deno.Kv;
  /** The KV database holding the ingest queue; the same as `kv` unless configured apart. */
  queueKv?: Deno.Kv;
  sql: Sql;
  engine: Engine;
  now: () => Date;
  newId: () => string;
  config: Config;
  /** The Shopify Admin API client; built from `config` when absent. */
  shopify?: ShopifyAdmin;
}

/** A write added to an atomic KV operation. */
export type KvWrite = (op: Deno.AtomicOperation) => void;

/**
 * What the usage meter collects while a request runs: the limiters' counts are committed with
 * the usage record in one KV write, or with the ingest queue's own commit (`done` then).
 */
export interface RequestMeter {
  started: Date;
  writes: KvWrite[];
  done: boolean;
}

/** The authenticated caller of a request. */
export interface AuthContext extends BrandContext {
  keyId: string;
}

/** Hono environment shared by every route and middleware. */
export interface AppEnv {
  Variables: {
    requestId: string;
    auth: AuthContext;
    /** KV entries read ahead with the key record (by `kvKeyId`), so a limiter need not read. */
    kvPrefetch: Map<string, Deno.KvEntryMaybe<unknown>>;
    /** The request's usage meter: writes to fold into its one KV commit (lib/usage.ts). */
    meter: RequestMeter;
    /** The body `bufferBody` read within its limit (null: none), for a handler to parse. */
    body: Uint8Array | null;
  };
}
