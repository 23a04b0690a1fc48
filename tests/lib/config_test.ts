import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../lib/config.ts";

const VALID_KEY = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));

function assertInvalid(env: Record<string, string>, ...names: string[]): void {
  assert.throws(
    () => loadConfig(env),
    (err: unknown) => {
      assert.ok(err instanceof Error);
      for (const name of names) assert.match(err.message, new RegExp(`\\b${name}\\b`), err.message);
      return true;
    },
    JSON.stringify(env),
  );
}

Deno.test("config: defaults", () => {
  const config = loadConfig({});
  // Compared field by field, so that adding a variable does not break this test.
  const expected = {
    port: 8000,
    databaseUrl: undefined,
    dataDir: "./data",
    kvPath: "./data/kv.sqlite3",
    tokenEncryptionKey: undefined,
    rateLimitPerMinute: 1200,
    maxBodyBytes: 1024 * 1024,
    cursorTtlSeconds: 3600,
  };
  for (const [field, value] of Object.entries(expected)) {
    assert.deepEqual(config[field as keyof typeof config], value, field);
  }
  assert.deepEqual(config.shopify, {
    apiKey: undefined,
    apiSecret: undefined,
    adminOrigin: "https://{shop}",
    apiVersion: "2025-10",
  });
});

Deno.test("config: with a DATABASE_URL and neither KV_PATH nor DATA_DIR, KV is the default database", () => {
  const url = "postgres://cdp@db.internal:5432/cdp";
  const deploy = loadConfig({ DATABASE_URL: url });
  assert.equal(deploy.kvPath, undefined);
  assert.equal(deploy.ingestQueue, "outbox");
  assert.equal(loadConfig({ DATABASE_URL: url, INGEST_QUEUE: "kv" }).ingestQueue, "kv");
  const local = loadConfig({ DATABASE_URL: url, DATA_DIR: "/srv/cdp" });
  assert.equal(local.kvPath, "/srv/cdp/kv.sqlite3");
  assert.equal(local.ingestQueue, "kv");
  assert.equal(loadConfig({ DATABASE_URL: url, KV_PATH: ":memory:" }).kvPath, ":memory:");
  assert.equal(loadConfig({ INGEST_QUEUE: "outbox" }).ingestQueue, "outbox");
});

Deno.test("config: MIGRATE and LOG_LEVEL", () => {
  assert.equal(loadConfig({}).migrate, true);
  assert.equal(loadConfig({ MIGRATE: "off" }).migrate, false);
  assert.equal(loadConfig({}).logLevel, "info");
  assert.equal(loadConfig({ LOG_LEVEL: "warn" }).logLevel, "warn");
  assertInvalid({ MIGRATE: "later" }, "MIGRATE");
  assertInvalid({ LOG_LEVEL: "loud" }, "LOG_LEVEL");
  assertInvalid({ INGEST_QUEUE: "sqs" }, "INGEST_QUEUE");
});

Deno.test("config: an invalid environment is a ConfigError listing the variables", () => {
  assert.throws(
    () => loadConfig({ PORT: "x", LOG_LEVEL: "loud" }),
    (err: unknown) => err instanceof ConfigError && err.variables.join() === "PORT,LOG_LEVEL",
  );
});

Deno.test("config: KV_PATH follows DATA_DIR unless set", () => {
  assert.equal(loadConfig({ DATA_DIR: "/srv/cdp" }).kvPath, "/srv/cdp/kv.sqlite3");
  const overridden = loadConfig({ DATA_DIR: "/srv/cdp", KV_PATH: "/var/kv/main.sqlite3" });
  assert.equal(overridden.kvPath, "/var/kv/main.sqlite3");
  assert.equal(overridden.dataDir, "/srv/cdp");
  assert.equal(loadConfig({ KV_PATH: ":memory:" }).kvPath, ":memory:");
});

Deno.test("config: explicit values are parsed and typed", () => {
  const config = loadConfig({
    PORT: "9001",
    DATABASE_URL: "postgres://cdp:secret@db.internal:5432/cdp",
    SHOPIFY_API_KEY: "k",
    SHOPIFY_API_SECRET: "s",
    SHOPIFY_ADMIN_ORIGIN: "http://127.0.0.1:9999",
    SHOPIFY_API_VERSION: "2026-01",
    TOKEN_ENCRYPTION_KEY: VALID_KEY,
    RATE_LIMIT_PER_MINUTE: "60",
    MAX_BODY_BYTES: "2048",
    CURSOR_TTL_SECONDS: "600",
  });
  assert.equal(config.port, 9001);
  assert.equal(config.databaseUrl, "postgres://cdp:secret@db.internal:5432/cdp");
  assert.deepEqual(config.shopify, {
    apiKey: "k",
    apiSecret: "s",
    adminOrigin: "http://127.0.0.1:9999",
    apiVersion: "2026-01",
  });
  assert.equal(config.tokenEncryptionKey, VALID_KEY);
  assert.equal(config.rateLimitPerMinute, 60);
  assert.equal(config.maxBodyBytes, 2048);
  assert.equal(config.cursorTtlSeconds, 600);
});

Deno.test("config: empty strings are treated as unset", () => {
  const config = loadConfig({
    PORT: "",
    DATABASE_URL: "",
    DATA_DIR: "",
    KV_PATH: "",
    SHOPIFY_API_VERSION: "",
    SHOPIFY_ADMIN_ORIGIN: "",
    TOKEN_ENCRYPTION_KEY: "",
    RATE_LIMIT_PER_MINUTE: "",
  });
  assert.deepEqual(config, loadConfig({}));
});

Deno.test("config: unrelated variables are ignored", () => {
  assert.deepEqual(loadConfig({ HOME: "/root", PATH: "/usr/bin", NODE_ENV: "x" }), loadConfig({}));
});

Deno.test("config: an invalid PORT throws an Error naming PORT", () => {
  for (const port of ["abc", "70000", "-1", "80.5", "8000x"]) assertInvalid({ PORT: port }, "PORT");
});

Deno.test("config: an invalid DATABASE_URL throws an Error naming DATABASE_URL", () => {
  for (const url of ["not a url", "postgres", "//nohost", "http://"]) {
    assertInvalid({ DATABASE_URL: url }, "DATABASE_URL");
  }
});

Deno.test("config: an invalid TOKEN_ENCRYPTION_KEY throws an Error naming it", () => {
  const sixteenBytes = btoa(String.fromCharCode(...new Uint8Array(16)));
  for (const key of ["short", sixteenBytes, `${VALID_KEY}A`, VALID_KEY.replace("=", "")]) {
    assertInvalid({ TOKEN_ENCRYPTION_KEY: key }, "TOKEN_ENCRYPTION_KEY");
  }
  // The message never echoes the rejected secret.
  assert.throws(
    () => loadConfig({ TOKEN_ENCRYPTION_KEY: "my-secret-value" }),
    (err: Error) => !err.message.includes("my-secret-value"),
  );
});

Deno.test("config: other invalid values name their variable; several are all named", () => {
  assertInvalid({ SHOPIFY_API_VERSION: "2025-10-01" }, "SHOPIFY_API_VERSION");
  assertInvalid({ RATE_LIMIT_PER_MINUTE: "0" }, "RATE_LIMIT_PER_MINUTE");
  assertInvalid({ MAX_BODY_BYTES: "100" }, "MAX_BODY_BYTES");
  assertInvalid({ CURSOR_TTL_SECONDS: "10" }, "CURSOR_TTL_SECONDS");
  assertInvalid({ PORT: "x", DATABASE_URL: "y" }, "PORT", "DATABASE_URL");
});

Deno.test("config: BODY_READ_TIMEOUT_MS and INGEST_MAX_BACKLOG have defaults and are checked", () => {
  const defaults = loadConfig({});
  assert.equal(defaults.bodyReadTimeoutMs, 30_000);
  assert.equal(defaults.ingestMaxBacklog, 1_000_000);
  const set = loadConfig({ BODY_READ_TIMEOUT_MS: "5000", INGEST_MAX_BACKLOG: "250" });
  assert.equal(set.bodyReadTimeoutMs, 5000);
  assert.equal(set.ingestMaxBacklog, 250);
  assertInvalid({ BODY_READ_TIMEOUT_MS: "0" }, "BODY_READ_TIMEOUT_MS");
  assertInvalid({ BODY_READ_TIMEOUT_MS: "soon" }, "BODY_READ_TIMEOUT_MS");
  assertInvalid({ INGEST_MAX_BACKLOG: "0" }, "INGEST_MAX_BACKLOG");
  assertInvalid({ INGEST_MAX_BACKLOG: "1.5" }, "INGEST_MAX_BACKLOG");
});

Deno.test("config: the ingest admission bounds have defaults and are checked", () => {
  const defaults = loadConfig({});
  assert.equal(defaults.ingestMaxInFlight, 128);
  assert.equal(defaults.ingestBackloggedInFlight, 8);
  assert.equal(defaults.ingestSoftBacklog, 20_000);
  const set = loadConfig({
    INGEST_MAX_BACKLOG: "1000",
    INGEST_MAX_IN_FLIGHT: "64",
    INGEST_BACKLOGGED_IN_FLIGHT: "4",
    INGEST_SOFT_BACKLOG_RATIO: "0.25",
  });
  assert.equal(set.ingestMaxInFlight, 64);
  assert.equal(set.ingestBackloggedInFlight, 4);
  assert.equal(set.ingestSoftBacklog, 250);
  // The soft threshold never rounds down to nothing.
  assert.equal(loadConfig({ INGEST_MAX_BACKLOG: "10" }).ingestSoftBacklog, 1);
  assertInvalid({ INGEST_MAX_IN_FLIGHT: "0" }, "INGEST_MAX_IN_FLIGHT");
  assertInvalid({ INGEST_BACKLOGGED_IN_FLIGHT: "many" }, "INGEST_BACKLOGGED_IN_FLIGHT");
  assertInvalid({ INGEST_SOFT_BACKLOG_RATIO: "0" }, "INGEST_SOFT_BACKLOG_RATIO");
  assertInvalid({ INGEST_SOFT_BACKLOG_RATIO: "1.5" }, "INGEST_SOFT_BACKLOG_RATIO");
});

Deno.test("config: TRUST_PROXY takes a hop count; true and false are 1 and 0", () => {
  assert.equal(loadConfig({}).trustProxy, 0);
  assert.equal(loadConfig({ TRUST_PROXY: "false" }).trustProxy, 0);
  assert.equal(loadConfig({ TRUST_PROXY: "true" }).trustProxy, 1);
  assert.equal(loadConfig({ TRUST_PROXY: "0" }).trustProxy, 0);
  assert.equal(loadConfig({ TRUST_PROXY: "2" }).trustProxy, 2);
  for (const bad of ["yes", "-1", "11", "1.5"]) assertInvalid({ TRUST_PROXY: bad }, "TRUST_PROXY");
});

Deno.test("config: brand-wide ceilings of the API, query and sync throttles", () => {
  const defaults = loadConfig({});
  assert.equal(defaults.brandRateLimitPerMinute, 3600);
  assert.equal(defaults.brandQueryRateLimitPerMinute, 360);
  assert.equal(defaults.brandSyncRateLimitPerMinute, 180);
  const set = loadConfig({
    BRAND_RATE_LIMIT_PER_MINUTE: "10",
    BRAND_QUERY_RATE_LIMIT_PER_MINUTE: "5",
    BRAND_SYNC_RATE_LIMIT_PER_MINUTE: "2",
  });
  assert.deepEqual(
    [
      set.brandRateLimitPerMinute,
      set.brandQueryRateLimitPerMinute,
      set.brandSyncRateLimitPerMinute,
    ],
    [10, 5, 2],
  );
  assertInvalid({ BRAND_RATE_LIMIT_PER_MINUTE: "0" }, "BRAND_RATE_LIMIT_PER_MINUTE");
});

Deno.test("config: predictions eligibility and CLV discount, with Klaviyo-like defaults", () => {
  assert.deepEqual(loadConfig({}).predictions, {
    minCustomers: 500,
    minHistoryDays: 180,
    clvDiscountRate: 0,
  });
  assert.deepEqual(
    loadConfig({
      PREDICTIONS_MIN_CUSTOMERS: "50",
      PREDICTIONS_MIN_HISTORY_DAYS: "90",
      CLV_DISCOUNT_RATE: "0.1",
    }).predictions,
    { minCustomers: 50, minHistoryDays: 90, clvDiscountRate: 0.1 },
  );
  assert.throws(() => loadConfig({ CLV_DISCOUNT_RATE: "2" }), ConfigError);
  assert.throws(() => loadConfig({ PREDICTIONS_MIN_CUSTOMERS: "0" }), ConfigError);
});
