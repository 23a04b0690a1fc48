/**
 * Builds apps over throwaway stores: `:memory:` KV and a fresh database per test (a clone of a
 * migrated PGlite, or with DATABASE_URL a new database on that server from a migrated template).
 */
import { PGlite } from "@electric-sql/pglite";
import type { OpenAPIHono } from "@hono/zod-openapi";
import postgres from "postgres";
import { monotonicFactory } from "ulid";
import { issueApiKey } from "../lib/tenancy/api_keys.ts";
import { createApp } from "../routes/app.ts";
import { COMMANDS } from "../lib/admin/command_table.ts";
import type { AppDeps, AppEnv } from "../lib/http/app_env.ts";
import { createBrand } from "../lib/tenancy/brands.ts";
import { createEmbeddedEngine } from "../lib/engine/embedded.ts";
import { createPrivacyAdmission } from "../lib/privacy/admission.ts";
import { lazyIdentifierHasher } from "../lib/privacy/identifiers.ts";
import {
  createKvQueue,
  type EventsMessage,
  type IngestQueue,
  type KvQueueOptions,
  type QueueBatch,
} from "../lib/ingest/queue.ts";
import { createIngestQueue } from "../lib/runtime/runtime.ts";
import { type Config, loadConfig } from "../lib/config.ts";
import { connectPostgres, servePglite, type Sql } from "../lib/store/db.ts";
import { migrate, MIGRATIONS } from "../lib/store/migrations.ts";
import { lazyTokenCipher, openTokenCipher } from "../lib/tenancy/token_cipher.ts";

/** The server under test when set; PGlite otherwise. */
export const DATABASE_URL = Deno.env.get("DATABASE_URL") || undefined;

/** A database that exists only for one test. `url` is set on a real server. */
export interface TestDatabase {
  sql: Sql;
  url?: string;
  close(): Promise<void>;
}

let _template: Promise<PGlite> | undefined;
let _serverTemplate: Promise<string> | undefined;

/** Opens a fresh, migrated database. */
export async function freshDatabase(): Promise<TestDatabase> {
  return DATABASE_URL ? await _freshServerDatabase(DATABASE_URL) : await _freshPglite();
}

async function _freshPglite(): Promise<TestDatabase> {
  _template ??= (async () => {
    const pglite = await PGlite.create();
    const served = await servePglite(pglite, `${await Deno.makeTempDir()}/pg.sock`, 1);
    await migrate(served.sql);
    await served.stop();
    return pglite;
  })();
  const pglite = (await (await _template).clone()) as PGlite;
  const dir = await Deno.makeTempDir();
  const served = await servePglite(pglite, `${dir}/pg.sock`);
  return {
    sql: served.sql,
    async close() {
      await served.stop();
      await pglite.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

async function _freshServerDatabase(url: string): Promise<TestDatabase> {
  const admin = postgres(url, { onnotice: () => {}, max: 1 });
  try {
    _serverTemplate ??= _serverTemplateDatabase(admin, url);
    const template = await _serverTemplate;
    const name = `cdp_test_${crypto.randomUUID().replaceAll("-", "")}`;
    await admin.unsafe(`create database ${name} template ${template}`);
    const testUrl = _withDatabase(url, name);
    const sql = connectPostgres(testUrl, 4);
    return {
      sql,
      url: testUrl,
      async close() {
        await sql.end({ timeout: 5 });
        const dropper = postgres(url, { onnotice: () => {}, max: 1 });
        await dropper.unsafe(`drop database if exists ${name} with (force)`);
        await dropper.end();
      },
    };
  } finally {
    await admin.end();
  }
}

async function _serverTemplateDatabase(admin: Sql, url: string): Promise<string> {
  // The template's name changes whenever the migrations do, so a stale one is never reused.
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(MIGRATIONS.map((m) => m.sql).join("\n")),
  );
  const name = `cdp_tpl_${
    Array.from(new Uint8Array(digest).slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join("")
  }`;
  // Concurrent test processes serialize on this lock while one of them builds the template.
  await admin`select pg_advisory_lock(7236112402)`;
  try {
    const [exists] = await admin`select 1 from pg_database where datname = ${name}`;
    if (!exists) {
      const building = `${name}_build_${Deno.pid}`;
      await admin.unsafe(`drop database if exists ${building}`);
      await admin.unsafe(`create database ${building}`);
      const sql = postgres(_withDatabase(url, building), { onnotice: () => {}, max: 1 });
      await migrate(sql);
      await sql.end();
      await admin.unsafe(`alter database ${building} rename to ${name}`);
    }
  } finally {
    await admin`select pg_advisory_unlock(7236112402)`;
  }
  return name;
}

function _withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** A clock tests can move. */
export interface TestClock {
  now(): Date;
  advance(ms: number): void;
}

/** A clock pinned at `start` that moves only when told. */
export function testClock(start = "2026-11-21T12:00:00.000Z"): TestClock {
  let time = Date.parse(start);
  return { now: () => new Date(time), advance: (ms) => void (time += ms) };
}

/** An app over throwaway stores, with helpers to provision brands. */
export interface TestContext {
  app: OpenAPIHono<AppEnv>;
  deps: AppDeps;
  kv: Deno.Kv;
  /** The app's ingest queue: Deno KV's queue over `kv` (or the `queueKv` override). */
  queue: IngestQueue;
  sql: Sql;
  clock: TestClock;
  config: Config;
  /** Creates a brand (shop and beta by default) and one API key for it. */
  seedBrand(
    options?: { name?: string; shop?: string | null; beta?: boolean; accessToken?: string },
  ): Promise<{
    brandId: string;
    scope: string | null;
    key: string;
    keyId: string;
  }>;
  /** `app.request` with the key as a bearer token. */
  request(path: string, key: string | null, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

let _shopCounter = 0;

/**
 * What a test may swap: any dependency, or `queueKv`, a KV database of its own for the ingest
 * queue (Deno KV's queue over it, with the app's backlog bound and retries).
 */
export type TestOverrides = Partial<AppDeps> & { queueKv?: Deno.Kv };

/** Builds a test context; `env` overrides configuration variables, `overrides` dependencies. */
export async function createTestContext(
  env: Record<string, string> = {},
  { queueKv, ...overrides }: TestOverrides = {},
): Promise<TestContext> {
  const database = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  const clock = testClock();
  // Tests run on a pinned clock and read insights right after writing orders: with no staleness
  // allowed, every read after a write sees it (the staleness rule has its own tests).
  const config = loadConfig({
    DATA_DIR: "/nonexistent",
    INSIGHTS_MAX_STALENESS_SECONDS: "0",
    ...env,
  });
  const newId = monotonicFactory();
  // As the runtime builds it: privacy's admission hook drops erased and suppressed people.
  const hasher = lazyIdentifierHasher(kv, config.tokenEncryptionKey);
  const engine = createEmbeddedEngine({
    sql: database.sql,
    now: clock.now,
    admission: createPrivacyAdmission(hasher),
  });
  // Deno KV's own queue whatever INGEST_QUEUE says (the outbox has its own tests).
  const queue = createIngestQueue(queueKv ?? kv, { ...config, ingestQueue: "kv" }, newId);
  const deps: AppDeps = {
    kv,
    queue,
    sql: database.sql,
    engine,
    now: clock.now,
    newId,
    config,
    cipher: lazyTokenCipher(kv, config.tokenEncryptionKey),
    hasher,
    ...overrides,
  };
  const app = createApp(deps, { adminCommands: COMMANDS });
  const cipher = await openTokenCipher(kv, undefined);
  return {
    app,
    deps,
    kv,
    queue: deps.queue,
    sql: database.sql,
    clock,
    config,
    async seedBrand(options = {}) {
      const shop = options.shop === undefined
        ? `shop-${Deno.pid}-${++_shopCounter}.myshopify.com`
        : options.shop;
      const brand = await createBrand({ sql: database.sql, kv, newId, now: clock.now, cipher }, {
        name: options.name ?? "Test brand",
        ...(shop === null ? {} : { shop }),
        ...(options.accessToken === undefined ? {} : { accessToken: options.accessToken }),
        beta: options.beta ?? true,
      });
      const issued = await issueApiKey({ kv, now: clock.now, newId }, { brandId: brand.id });
      return { brandId: brand.id, scope: brand.shop, key: issued.key, keyId: issued.id };
    },
    request(path, key, init = {}) {
      const headers = new Headers(init.headers);
      if (key !== null) headers.set("Authorization", `Bearer ${key}`);
      return Promise.resolve(app.request(path, { ...init, headers }));
    },
    async close() {
      try {
        kv.close();
      } catch { /* a test closed it to stop a queue listener */ }
      await database.close();
    },
  };
}

/** Runs `fn` over a fresh test context and always closes it. */
export async function withContext(
  fn: (ctx: TestContext) => Promise<void>,
  env: Record<string, string> = {},
  overrides: TestOverrides = {},
): Promise<void> {
  const ctx = await createTestContext(env, overrides);
  try {
    await fn(ctx);
  } finally {
    await ctx.close();
  }
}

/** Reads a JSON error envelope and checks its shape. */
export async function errorBody(
  res: Response,
): Promise<{ error: string; error_description: string }> {
  const body = await res.json();
  if (
    typeof body.error !== "string" ||
    Object.keys(body).some((k) => !["error", "error_description"].includes(k))
  ) {
    throw new Error(`not an error envelope: ${JSON.stringify(body)}`);
  }
  return body;
}

/** The built-in event type names the API contract lists for the catalog. */
export const SPEC_EVENT_TYPES = [
  "page_viewed",
  "cart_viewed",
  "checkout_started",
  "checkout_completed",
  "product_viewed",
  "product_added_to_cart",
  "search_submitted",
  "order_created",
  "checkout_abandoned",
  "checkout_recovered",
  "customer_updated",
  "consent_updated",
  "subscription_changed",
  "refund_issued",
  "cart_updated",
  "fulfillment_updated",
  "updateProperties",
  "view",
  "modifyConsent",
];

/** Runs `fn` over a fresh `:memory:` KV and always closes it. */
export async function withKv(fn: (kv: Deno.Kv) => Promise<void> | void): Promise<void> {
  const kv = await Deno.openKv(":memory:");
  try {
    await fn(kv);
  } finally {
    kv.close();
  }
}

/** Polls until `check` holds; the queue delivers asynchronously. Bounded, never a timing assertion. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Listens on a KV queue and records every message without applying it. */
export function recordQueue(kv: Deno.Kv): { seen: EventsMessage[]; listening: Promise<void> } {
  const seen: EventsMessage[] = [];
  const listening = kv.listenQueue((message) => void seen.push(message as EventsMessage));
  return { seen, listening };
}

/** Runs `fn` over a fresh database holding one brand (shop `b.myshopify.com`, beta on). */
export async function withBrandDatabase(
  fn: (sql: Sql, brandId: string) => Promise<void>,
): Promise<void> {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  try {
    const brand = await createBrand(
      {
        sql: db.sql,
        newId: monotonicFactory(),
        now: testClock().now,
        cipher: await openTokenCipher(kv, undefined),
      },
      { name: "B", shop: "b.myshopify.com", beta: true },
    );
    await fn(db.sql, brand.id);
  } finally {
    kv.close();
    await db.close();
  }
}

/** Deno KV's queue over `kv`, as the app builds it (ids from `newId`, retries on `backoffMs`). */
export function kvQueue(kv: Deno.Kv, options: Partial<KvQueueOptions> = {}): IngestQueue {
  return createKvQueue(kv, { newId: monotonicFactory(), ...options });
}

/** Queues a batch on Deno KV's queue over `kv` as the edge does: one commit, no backlog bound. */
export function enqueueBatch(
  kv: Deno.Kv,
  input: QueueBatch & { newId: () => string; backoffMs?: number[] },
): Promise<void> {
  const { newId, backoffMs, ...batch } = input;
  return kvQueue(kv, { newId, backoffMs }).accept(batch);
}

/** Bundles a browser entry point with `deno bundle` (the browser tests' scripts; nothing committed). */
export async function bundleForBrowser(entry: string): Promise<string> {
  const dir = await Deno.makeTempDir();
  const out = `${dir}/bundle.js`;
  const run = await new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--quiet", "--platform", "browser", "-o", out, entry],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!run.success) throw new Error(new TextDecoder().decode(run.stderr));
  const text = await Deno.readTextFile(out);
  await Deno.remove(dir, { recursive: true });
  return text;
}

/** The statements `sql` sends while `fn` runs (postgres.js reads its debug option per query). */
export async function statements(sql: Sql, fn: () => Promise<void>): Promise<string[]> {
  const sent: string[] = [];
  const options = sql.options as { debug?: unknown };
  const before = options.debug;
  options.debug = (_id: number, text: string) => void sent.push(text);
  try {
    await fn();
  } finally {
    options.debug = before;
  }
  return sent;
}
