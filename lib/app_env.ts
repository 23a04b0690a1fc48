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

/** The authenticated caller of a request. */
export interface AuthContext extends BrandContext {
  keyId: string;
}

/** Hono environment shared by every route and middleware. */
export interface AppEnv {
  Variables: {
    requestId: string;
    auth: AuthContext;
  };
}
