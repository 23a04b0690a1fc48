/**
 * The service's configuration, read and validated from the environment.
 *
 * @module
 */
import { z } from "zod";

/** Environment variables the service and the CLI read (docs/operations.md). */
const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8000),
  DATABASE_URL: z.string().url().optional(),
  DATA_DIR: z.string().min(1).default("./data"),
  KV_PATH: z.string().min(1).optional(),
  SHOPIFY_API_KEY: z.string().min(1).optional(),
  SHOPIFY_API_SECRET: z.string().min(1).optional(),
  SHOPIFY_ADMIN_ORIGIN: z.string().min(1).default("https://{shop}"),
  SHOPIFY_API_VERSION: z.string().regex(/^\d{4}-\d{2}$/).default("2025-10"),
  TOKEN_ENCRYPTION_KEY: z.string().regex(/^[A-Za-z0-9+/]{43}=$/, "base64 of 32 bytes")
    .optional(),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(1200),
  MAX_BODY_BYTES: z.coerce.number().int().min(1024).default(1024 * 1024),
  CURSOR_TTL_SECONDS: z.coerce.number().int().min(60).default(3600),
  QUERY_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
  QUERY_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(120),
  KEY_ROTATION_GRACE_SECONDS: z.coerce.number().int().min(0).max(30 * 86400).default(86400),
  PIXEL_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(120),
  // `true`/`false` are the older spelling of 1 and 0 hops, kept so existing deployments keep
  // working.
  TRUST_PROXY: z.string().regex(/^(true|false|\d{1,2})$/, "a number of proxy hops, or true/false")
    .transform((value) => value === "true" ? 1 : value === "false" ? 0 : Number(value))
    .pipe(z.number().int().min(0).max(10))
    .default(0),
  SYNC_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(60),
  BRAND_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(3600),
  BRAND_QUERY_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(360),
  BRAND_SYNC_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(180),
  SYNC_BUDGET_MS: z.coerce.number().int().min(1).max(60_000).default(5000),
  INGEST_RETRY_BACKOFF_MS: z.string().regex(/^\d+(,\d+){0,4}$/, "up to 5 comma-separated ms")
    .default("1000,5000,30000,120000,600000"),
  PRODUCT_CACHE_TTL_SECONDS: z.coerce.number().int().min(0).max(3600).default(60),
  SHOPIFY_MAX_RETRIES: z.coerce.number().int().min(0).max(5).default(2),
  FORWARDER: z.enum(["on", "off"]).default("on"),
  FORWARDER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  INSIGHTS_MAX_STALENESS_SECONDS: z.coerce.number().int().min(0).max(3600).default(120),
  BODY_READ_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
  INGEST_MAX_BACKLOG: z.coerce.number().int().min(1).default(1_000_000),
  INGEST_QUEUE: z.enum(["kv", "outbox"]).optional(),
  MIGRATE: z.enum(["on", "off"]).default("on"),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  ADMIN_TOKEN: z.string().min(32, "at least 32 characters (openssl rand -base64 32)")
    .regex(/^[\x21-\x7e]+$/, "printable ASCII without spaces").optional(),
  ADMIN_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(60),
  ADMIN_URL: z.string().url().regex(/^https?:\/\//, "an http(s) URL").optional(),
  INGEST_MAX_IN_FLIGHT: z.coerce.number().int().min(1).max(100_000).default(128),
  INGEST_BACKLOGGED_IN_FLIGHT: z.coerce.number().int().min(1).max(100_000).default(8),
  INGEST_SOFT_BACKLOG_RATIO: z.coerce.number().gt(0).max(1).default(0.02),
  PREDICTIONS_MIN_CUSTOMERS: z.coerce.number().int().min(1).default(500),
  PREDICTIONS_MIN_HISTORY_DAYS: z.coerce.number().int().min(0).max(3650).default(180),
  CLV_DISCOUNT_RATE: z.coerce.number().min(0).max(1).default(0),
  DESTINATIONS_ALLOW_PRIVATE: z.enum(["true", "false"]).default("false"),
  MAX_DESTINATIONS_PER_BRAND: z.coerce.number().int().min(1).max(1000).default(20),
  DESTINATION_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(600),
  DESTINATION_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  DESTINATION_RETRY_SECONDS: z.coerce.number().int().min(1).max(7 * 86400).default(86400),
  DESTINATION_BACKOFF_MS: z.coerce.number().int().min(10).max(600_000).default(1000),
  DESTINATION_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(500),
});

/** Validated service configuration. */
export interface Config {
  port: number;
  databaseUrl: string | undefined;
  dataDir: string;
  /** Argument to `Deno.openKv`; undefined opens the platform's default database (Deno Deploy). */
  kvPath: string | undefined;
  shopify: {
    apiKey: string | undefined;
    apiSecret: string | undefined;
    adminOrigin: string;
    apiVersion: string;
  };
  tokenEncryptionKey: string | undefined;
  rateLimitPerMinute: number;
  maxBodyBytes: number;
  cursorTtlSeconds: number;
  syncRateLimitPerMinute: number;
  pixelRateLimitPerMinute: number;
  queryRateLimitPerMinute: number;
  /** Brand-wide ceilings of the API-wide, query and sync throttles, whatever the number of keys. */
  brandRateLimitPerMinute: number;
  brandQueryRateLimitPerMinute: number;
  brandSyncRateLimitPerMinute: number;
  /** statement_timeout of one query-API or export statement. */
  queryTimeoutMs: number;
  keyRotationGraceSeconds: number;
  /**
   * Reverse proxies in front of the service that append to X-Forwarded-For: the client address
   * is the entry this many from the right (0: the socket's peer).
   */
  trustProxy: number;
  syncBudgetMs: number;
  ingestRetryBackoffMs: number[];
  /** Lifetime of a cached Admin API product read; 0 turns the cache off. */
  productCacheTtlSeconds: number;
  /** Retries of a throttled Admin API call (THROTTLED or HTTP 429) before answering 429. */
  shopifyMaxRetries: number;
  /** Whether main.ts consumes the ingest queue itself (off: `deno task worker` does). */
  forwarder: boolean;
  /** Queue messages one forwarder process applies at once. */
  forwarderConcurrency: number;
  /** How long insights may be served from a snapshot older than the last order write. */
  insightsMaxStalenessSeconds: number;
  /** How long a client may take to send a whole request body (408 past it). */
  bodyReadTimeoutMs: number;
  /** Queued events past which async ingest answers 503 `queue_full`. */
  ingestMaxBacklog: number;
  /** Where accepted batches wait: Deno KV's queue, or an outbox in KV drained by polling. */
  ingestQueue: "kv" | "outbox";
  /** Whether start-up applies pending migrations (off: `deno task admin migrate` does). */
  migrate: boolean;
  /** The least severe log line written. */
  logLevel: "debug" | "info" | "warn" | "error";
  /** The operator API's bearer token; unset, `/admin` does not exist. */
  adminToken: string | undefined;
  /** Failed `/admin` authentications per client address per minute (the token always passes). */
  adminRateLimitPerMinute: number;
  /** The CLI runs its commands on the service at this URL (with `adminToken`) instead. */
  adminUrl: string | undefined;
  /** Async ingest requests one process works on at once (503 `queue_full` past it). */
  ingestMaxInFlight: number;
  /** The same bound while the backlog is over `ingestSoftBacklog`. */
  ingestBackloggedInFlight: number;
  /** Queued events past which `ingestBackloggedInFlight` applies. */
  ingestSoftBacklog: number;
  /** What a brand needs for predictions (docs/commerce.md): customers with orders, days of history. */
  predictions: { minCustomers: number; minHistoryDays: number; clvDiscountRate: number };
  /** Webhook destinations and their delivery (docs/audiences.md#delivery). */
  destinations: DestinationSettings;
}

/** How destinations are bounded and delivered to. */
export interface DestinationSettings {
  /** `http` and private, loopback or link-local addresses allowed (development and tests). */
  allowPrivate: boolean;
  /** Destinations one brand may have. */
  maxPerBrand: number;
  /** POSTs (attempts) per brand per minute, over all its destinations. */
  ratePerMinute: number;
  /** How long a receiver has to answer one POST. */
  timeoutMs: number;
  /** How long a delivery is retried before it is dead-lettered. */
  retryMs: number;
  /** The first retry's delay; each next one doubles it (at most an hour). */
  backoffMs: number;
  /** How often a delivering process looks for new changes and due retries. */
  pollMs: number;
}

/** An environment that does not validate, with the variables at fault. */
export class ConfigError extends Error {
  /** The invalid variables' names. */
  readonly variables: string[];

  constructor(variables: string[], message: string) {
    super(message);
    this.name = "ConfigError";
    this.variables = variables;
  }
}

/** Builds the config from an environment map; throws a {@linkcode ConfigError} naming them. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  // Empty strings mean "unset", as in a shell `FOO= deno task start`.
  const cleaned = Object.fromEntries(
    Object.entries(env).filter(([, value]) => value !== undefined && value !== ""),
  );
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(
      [...new Set(parsed.error.issues.map((i) => i.path.join(".")))],
      `invalid environment: ${problems.join("; ")}`,
    );
  }
  const e = parsed.data;
  // Without a KV path, with a database server and no data directory nothing needs a writable
  // file system: KV is the platform's default database (on Deno Deploy, the app's own).
  const kvPath = e.KV_PATH ??
    (e.DATABASE_URL && cleaned.DATA_DIR === undefined ? undefined : `${e.DATA_DIR}/kv.sqlite3`);
  return {
    port: e.PORT,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    kvPath,
    shopify: {
      apiKey: e.SHOPIFY_API_KEY,
      apiSecret: e.SHOPIFY_API_SECRET,
      adminOrigin: e.SHOPIFY_ADMIN_ORIGIN,
      apiVersion: e.SHOPIFY_API_VERSION,
    },
    tokenEncryptionKey: e.TOKEN_ENCRYPTION_KEY,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    maxBodyBytes: e.MAX_BODY_BYTES,
    cursorTtlSeconds: e.CURSOR_TTL_SECONDS,
    syncRateLimitPerMinute: e.SYNC_RATE_LIMIT_PER_MINUTE,
    pixelRateLimitPerMinute: e.PIXEL_RATE_LIMIT_PER_MINUTE,
    queryRateLimitPerMinute: e.QUERY_RATE_LIMIT_PER_MINUTE,
    brandRateLimitPerMinute: e.BRAND_RATE_LIMIT_PER_MINUTE,
    brandQueryRateLimitPerMinute: e.BRAND_QUERY_RATE_LIMIT_PER_MINUTE,
    brandSyncRateLimitPerMinute: e.BRAND_SYNC_RATE_LIMIT_PER_MINUTE,
    queryTimeoutMs: e.QUERY_TIMEOUT_MS,
    keyRotationGraceSeconds: e.KEY_ROTATION_GRACE_SECONDS,
    trustProxy: e.TRUST_PROXY,
    syncBudgetMs: e.SYNC_BUDGET_MS,
    ingestRetryBackoffMs: e.INGEST_RETRY_BACKOFF_MS.split(",").map(Number),
    productCacheTtlSeconds: e.PRODUCT_CACHE_TTL_SECONDS,
    shopifyMaxRetries: e.SHOPIFY_MAX_RETRIES,
    forwarder: e.FORWARDER === "on",
    forwarderConcurrency: e.FORWARDER_CONCURRENCY,
    insightsMaxStalenessSeconds: e.INSIGHTS_MAX_STALENESS_SECONDS,
    bodyReadTimeoutMs: e.BODY_READ_TIMEOUT_MS,
    ingestMaxBacklog: e.INGEST_MAX_BACKLOG,
    // The platform's default KV documents no queue delivery since Deploy Classic ended.
    ingestQueue: e.INGEST_QUEUE ?? (kvPath === undefined ? "outbox" : "kv"),
    migrate: e.MIGRATE === "on",
    logLevel: e.LOG_LEVEL,
    adminToken: e.ADMIN_TOKEN,
    adminRateLimitPerMinute: e.ADMIN_RATE_LIMIT_PER_MINUTE,
    adminUrl: e.ADMIN_URL?.replace(/\/+$/, ""),
    ingestMaxInFlight: e.INGEST_MAX_IN_FLIGHT,
    ingestBackloggedInFlight: e.INGEST_BACKLOGGED_IN_FLIGHT,
    ingestSoftBacklog: Math.max(1, Math.floor(e.INGEST_MAX_BACKLOG * e.INGEST_SOFT_BACKLOG_RATIO)),
    predictions: {
      minCustomers: e.PREDICTIONS_MIN_CUSTOMERS,
      minHistoryDays: e.PREDICTIONS_MIN_HISTORY_DAYS,
      clvDiscountRate: e.CLV_DISCOUNT_RATE,
    },
    destinations: {
      allowPrivate: e.DESTINATIONS_ALLOW_PRIVATE === "true",
      maxPerBrand: e.MAX_DESTINATIONS_PER_BRAND,
      ratePerMinute: e.DESTINATION_RATE_LIMIT_PER_MINUTE,
      timeoutMs: e.DESTINATION_TIMEOUT_MS,
      retryMs: e.DESTINATION_RETRY_SECONDS * 1000,
      backoffMs: e.DESTINATION_BACKOFF_MS,
      pollMs: e.DESTINATION_POLL_MS,
    },
  };
}
