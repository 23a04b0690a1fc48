/**
 * The HTTP pipeline: what every request passes through before a route handler (request id,
 * CORS, route guard, body limit, authentication, usage meter, rate limits) and how errors leave
 * it. This module composes the Hono environment from the context variables each middleware
 * declares, and names the app's outside dependencies. See docs/architecture.md.
 *
 * @module
 */
import type { Config } from "../config.ts";
import type { LogLevel } from "../log.ts";
import type { Database, Sql } from "../store/db.ts";
import type { Engine } from "../engine/engine.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import type { ShopifyAdmin } from "../shopify/admin_client.ts";
import type { TokenCipher } from "../tenancy/token_cipher.ts";
import type { IdentifierHasher } from "../privacy/identifiers.ts";
import type { AuthVariables } from "./auth.ts";
import type { BodyVariables } from "./body_limit.ts";
import type { RequestIdVariables } from "./request_id.ts";
import type { MeterVariables } from "./usage.ts";

/** Everything the app needs from outside, passed in so tests can swap stores and the clock. */
export interface AppDeps {
  kv: Deno.Kv;
  /**
   * The ingest queue (Deno KV's queue or the outbox, chosen at start); its KV database is `kv`
   * unless configured apart.
   */
  queue: IngestQueue;
  sql: Sql;
  /** How `sql` reaches its database (operator commands choose COPY on a server by it). */
  database?: Pick<Database, "mode">;
  engine: Engine;
  now: () => Date;
  newId: () => string;
  config: Config;
  /** Seals and opens secrets at rest (destinations' signing secrets); the runtime's. */
  cipher: TokenCipher;
  /** The keyed hash of people's identifiers (privacy requests, redact webhooks); the runtime's. */
  hasher: () => Promise<IdentifierHasher>;
  /** The Shopify Admin API client; built from `config` when absent. */
  shopify?: ShopifyAdmin;
  /** Where the access log goes (lib/log.ts); no access log when absent. */
  log?: (level: LogLevel, message: string, fields?: Record<string, unknown>) => void;
}

/** Hono environment shared by every route and middleware: the middlewares' variables together. */
export type AppEnv = {
  Variables: RequestIdVariables & AuthVariables & MeterVariables & BodyVariables;
};
