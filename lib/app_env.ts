import type { BrandContext } from "./brands.ts";
import type { Config } from "./config.ts";
import type { Sql } from "./db.ts";

/** Everything the app needs from outside, passed in so tests can swap stores and the clock. */
export interface AppDeps {
  kv: Deno.Kv;
  sql: Sql;
  now: () => Date;
  newId: () => string;
  config: Config;
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
