/**
 * A brand's Shopify history backfill (`shop sync`, the `shop_sync` queue job): one bulk query per
 * kind (customers, then orders), each run to its end (bulk_operation.ts), its JSONL streamed and
 * regrouped (bulk_jsonl.ts) and applied through the write path of `orders import`
 * (lib/commerce/import.ts, orders.ts) and of contacts (contacts.ts). Its state lives in Deno KV
 * for `shop status`.
 *
 * Safe to repeat and to resume: every write is idempotent by external id or Shopify customer id,
 * and a stale object (older `updatedAt` than what is stored) is skipped, so a re-run writes
 * nothing new and a webhook that landed meanwhile keeps its newer state. A run that stops half way
 * is run again; when it is the same run (a redelivered queue job) it attaches to its own bulk
 * operation still running at Shopify instead of starting another, and skips the kinds it already
 * applied.
 *
 * @module
 */
import type { Config } from "../config.ts";
import { DomainError } from "../errors.ts";
import { ulidSource } from "../ids.ts";
import { importRecords, type ImportResult } from "../commerce/import.ts";
import { type SourcedCustomer, upsertSourcedCustomers } from "../commerce/contacts.ts";
import { CustomerSchema } from "../commerce/order_lines.ts";
import { orderImport } from "../commerce/orders.ts";
import type { Sql, Tx } from "../store/db.ts";
import { shopSyncStateKey } from "../store/kv_keys.ts";
import type { Stores } from "../store/stores.ts";
import type { TokenCipher } from "../tenancy/token_cipher.ts";
import {
  shopifyAdminFromConfig,
  type ShopifyCredentials,
  type ShopifyGraphql,
} from "./admin_client.ts";
import { bulkCustomerRecords, bulkOrderRecords } from "./bulk_jsonl.ts";
import { customersBulkQuery, ordersBulkQuery, type SyncKind } from "./bulk_mapping.ts";
import {
  awaitBulkOperation,
  type BulkOperation,
  currentBulkOperation,
  type PollOptions,
  requireCompleted,
  startBulkQuery,
} from "./bulk_operation.ts";

/** One backfill asked for: `runId` names it, so a redelivered job resumes instead of repeating. */
export interface ShopSyncRequest {
  runId: string;
  brandId: string;
  /** `YYYY-MM-DD`: objects created on or after it; null = the shop's whole history. */
  since: string | null;
  /** One kind only; null = customers, then orders. */
  only: SyncKind | null;
}

/** A bulk operation of a run, as last seen. */
export interface SyncOperation {
  id: string;
  status: string;
  errorCode: string | null;
  objectCount: number;
  /** True once its file is applied. */
  applied: boolean;
}

/** What `shop status` prints: the brand's latest backfill. */
export interface ShopSyncState extends ShopSyncRequest {
  status: "queued" | "running" | "completed" | "failed";
  /** The kind being read, while running. */
  phase: SyncKind | null;
  bulkOperationId: string | null;
  operations: Partial<Record<SyncKind, SyncOperation>>;
  counts: { orders: number; customers: number; lineItems: number; rejected: number };
  lastError: string | null;
  queuedAt: string | null;
  startedAt: string | null;
  updatedAt: string;
  finishedAt: string | null;
}

/** A rejected object: the kind of file, its line there, why. */
export interface SyncRejection {
  file: SyncKind;
  line: number;
  errors: string[];
}

/** What `shop sync` prints. */
export interface ShopSyncResult {
  bulkOperationId: string | null;
  orders: number;
  customers: number;
  lineItems: number;
  rejected: SyncRejection[];
  rejected_truncated?: true;
}

/** A step of a running backfill, for progress lines. */
export type SyncProgress =
  | { phase: SyncKind; step: "bulk"; operation: BulkOperation }
  | { phase: SyncKind; step: "read" | "applied"; count: number };

/** What a backfill needs. */
export interface ShopSyncDeps {
  sql: Sql;
  kv: Deno.Kv;
  client: ShopifyGraphql;
  /** Opens the brand's stored access token. */
  cipher: Pick<TokenCipher, "decrypt">;
  now: () => Date;
  newId: () => string;
  /** Insert new orders with COPY (a PostgreSQL server). */
  copy: boolean;
  /** Downloads the JSONL (default the global fetch). */
  fetch?: typeof fetch;
  /** How long the download may go without a byte before it fails (default 60 s). */
  downloadIdleMs?: number;
  poll?: Omit<PollOptions, "onPoll">;
  /** Where the order file's partitions go (default the system's temporary directory). */
  tempDir?: string;
  objectsPerPartition?: number;
  onProgress?: (progress: SyncProgress) => void;
}

/**
 * The deps of a backfill over the service's stores, its runtime's cipher and config (ids, clock,
 * COPY on a server).
 */
export function shopSyncDeps(
  stores: Pick<Stores, "sql" | "kv"> & {
    database: Pick<Stores["database"], "mode">;
    cipher: Pick<TokenCipher, "decrypt">;
  },
  config: Config,
  extra: Partial<ShopSyncDeps> = {},
): ShopSyncDeps {
  return {
    sql: stores.sql,
    kv: stores.kv,
    client: shopifyAdminFromConfig(config),
    cipher: stores.cipher,
    now: () => new Date(),
    newId: ulidSource(),
    copy: stores.database.mode === "postgres",
    ...extra,
  };
}

/** Customers a transaction. */
const _CUSTOMER_BATCH = 2_000;
/** Rejections listed per kind at most. */
const _MAX_LISTED = 10_000;

/** The brand's latest backfill state, or null when it never ran one. */
export async function readShopSyncState(
  kv: Deno.Kv,
  brandId: string,
): Promise<ShopSyncState | null> {
  return (await kv.get<ShopSyncState>(shopSyncStateKey(brandId))).value;
}

/** A fresh state for a request (`queued` until a run starts it). */
export function newShopSyncState(request: ShopSyncRequest, now: Date): ShopSyncState {
  return {
    ...request,
    status: "queued",
    phase: null,
    bulkOperationId: null,
    operations: {},
    counts: { orders: 0, customers: 0, lineItems: 0, rejected: 0 },
    lastError: null,
    queuedAt: now.toISOString(),
    startedAt: null,
    updatedAt: now.toISOString(),
    finishedAt: null,
  };
}

/**
 * Runs a backfill to its end and returns its counts. Throws (after recording the failure in the
 * state) on a userError, an operation that ends FAILED, CANCELED or EXPIRED (with its errorCode),
 * a brand without a connected shop or token, and any failure to reach Shopify or the database.
 */
export async function runShopSync(
  deps: ShopSyncDeps,
  request: ShopSyncRequest,
): Promise<ShopSyncResult> {
  const key = shopSyncStateKey(request.brandId);
  const stored = await readShopSyncState(deps.kv, request.brandId);
  const state = stored?.runId === request.runId ? stored : newShopSyncState(request, deps.now());
  const save = async () => {
    state.updatedAt = deps.now().toISOString();
    await deps.kv.set(key, state);
  };
  state.status = "running";
  state.startedAt ??= deps.now().toISOString();
  state.finishedAt = null;
  state.lastError = null;
  await save();
  const result: ShopSyncResult = {
    bulkOperationId: null,
    orders: 0,
    customers: 0,
    lineItems: 0,
    rejected: [],
  };
  try {
    const credentials = await _credentials(deps, request.brandId);
    const kinds: SyncKind[] = request.only ? [request.only] : ["customers", "orders"];
    for (const kind of kinds) {
      const done = state.operations[kind];
      if (done?.applied) {
        result.bulkOperationId = done.id;
        continue;
      }
      state.phase = kind;
      const op = await _runOperation(deps, credentials, request, state, kind, save);
      result.bulkOperationId = op.id;
      if (op.url) {
        const body = await _download(deps, op.url);
        const applied = kind === "orders"
          ? await _applyOrders(deps, request.brandId, body, op)
          : await _applyCustomers(deps, request.brandId, body);
        state.counts.orders += applied.orders;
        state.counts.customers += applied.customers;
        state.counts.lineItems += applied.lineItems;
        state.counts.rejected += applied.rejectedCount;
        result.rejected.push(...applied.rejected.map((r) => ({ file: kind, ...r })));
        if (applied.truncated) result.rejected_truncated = true;
      }
      state.operations[kind] = { ...state.operations[kind]!, applied: true };
      await save();
    }
    state.status = "completed";
    state.phase = null;
    state.finishedAt = deps.now().toISOString();
    await save();
  } catch (err) {
    state.status = "failed";
    state.lastError = err instanceof Error ? err.message : String(err);
    state.finishedAt = deps.now().toISOString();
    await save().catch(() => {});
    throw err;
  }
  return {
    ...result,
    orders: state.counts.orders,
    customers: state.counts.customers,
    lineItems: state.counts.lineItems,
  };
}

/** The brand's shop and decrypted token; refused when there is no connected shop or no token. */
async function _credentials(deps: ShopSyncDeps, brandId: string): Promise<ShopifyCredentials> {
  const [row] = await deps.sql<
    { shop_domain: string; status: string; access_token_ciphertext: string | null }[]
  >`
    select shop_domain, status, access_token_ciphertext from integrations
    where brand_id = ${brandId} and provider = 'shopify'`;
  if (!row) throw new DomainError("forbidden", `brand ${brandId} has no Shopify shop`);
  if (row.status !== "connected") {
    throw new DomainError(
      "forbidden",
      `the Shopify integration of brand ${brandId} is disconnected`,
    );
  }
  if (!row.access_token_ciphertext) {
    throw new DomainError("forbidden", `no access token is stored for ${row.shop_domain}`);
  }
  return {
    shop: row.shop_domain,
    accessToken: await deps.cipher.decrypt(row.access_token_ciphertext),
  };
}

/**
 * Starts the kind's bulk query, or attaches to the run's own operation when Shopify still has
 * it (a resumed run), and waits for its end; anything but COMPLETED throws.
 */
async function _runOperation(
  deps: ShopSyncDeps,
  credentials: ShopifyCredentials,
  request: ShopSyncRequest,
  state: ShopSyncState,
  kind: SyncKind,
  save: () => Promise<void>,
): Promise<BulkOperation> {
  const previous = state.operations[kind];
  let id: string | null = null;
  if (previous) {
    const current = await currentBulkOperation(deps.client, credentials);
    if (
      current?.id === previous.id && !["FAILED", "CANCELED", "EXPIRED"].includes(current.status)
    ) {
      id = current.id;
    }
  }
  if (id === null) {
    const query = kind === "orders"
      ? ordersBulkQuery(request.since)
      : customersBulkQuery(request.since);
    const started = await startBulkQuery(deps.client, credentials, query);
    id = started.id;
    state.operations[kind] = {
      id,
      status: started.status,
      errorCode: null,
      objectCount: 0,
      applied: false,
    };
  }
  state.bulkOperationId = id;
  await save();
  let lastStatus = "";
  const op = await awaitBulkOperation(deps.client, credentials, id, {
    ...deps.poll,
    onPoll: (seen) => {
      state.operations[kind] = {
        id: seen.id,
        status: seen.status,
        errorCode: seen.errorCode,
        objectCount: seen.objectCount,
        applied: false,
      };
      deps.onProgress?.({ phase: kind, step: "bulk", operation: seen });
      // Status changes are saved at once; counts ride along with the next save.
      if (seen.status !== lastStatus) {
        lastStatus = seen.status;
        save().catch(() => {});
      }
    },
  });
  await save();
  return requireCompleted(op);
}

/** A download that receives nothing for this long is abandoned (see ShopSyncDeps). */
const _DOWNLOAD_IDLE_MS = 60_000;

/**
 * The operation's file as a stream that fails when no byte arrives for `downloadIdleMs`, headers
 * included: a stalled connection ends the run with a reason (and the queue's retry resumes it)
 * instead of holding it forever. The bound is on silence, not on the whole transfer, whose length
 * grows with the shop's history.
 */
async function _download(deps: ShopSyncDeps, url: string): Promise<ReadableStream<Uint8Array>> {
  const idleMs = deps.downloadIdleMs ?? _DOWNLOAD_IDLE_MS;
  const stalled = () =>
    new DomainError(
      "unavailable",
      `the bulk operation's file stalled: no bytes for ${idleMs / 1000} s`,
    );
  const abort = new AbortController();
  const headersTimer = setTimeout(() => abort.abort(stalled()), idleMs);
  let res: Response;
  try {
    res = await (deps.fetch ?? fetch)(url, { signal: abort.signal });
  } catch (err) {
    if (err instanceof DomainError) throw err;
    throw new DomainError("unavailable", "the bulk operation's file could not be downloaded", {
      cause: err,
    });
  } finally {
    clearTimeout(headersTimer);
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw new DomainError(
      "upstream_failed",
      `the bulk operation's file could not be downloaded (HTTP ${res.status})`,
    );
  }
  const reader = res.body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const silence = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(stalled()), idleMs);
      });
      try {
        const { value, done } = await Promise.race([reader.read(), silence]);
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (err) {
        reader.cancel(err).catch(() => {});
        controller.error(err);
      } finally {
        clearTimeout(timer);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

interface _Applied {
  orders: number;
  customers: number;
  lineItems: number;
  rejected: { line: number; errors: string[] }[];
  rejectedCount: number;
  truncated: boolean;
}

/** The orders file through `orders import`'s steps; line items counted as they are read. */
async function _applyOrders(
  deps: ShopSyncDeps,
  brandId: string,
  body: ReadableStream<Uint8Array>,
  op: BulkOperation,
): Promise<_Applied> {
  let lineItems = 0;
  const records = bulkOrderRecords(body, {
    objectCount: op.objectCount,
    fileSize: op.fileSize,
    ...(deps.objectsPerPartition ? { objectsPerPartition: deps.objectsPerPartition } : {}),
    ...(deps.tempDir ? { tempDir: deps.tempDir } : {}),
    onRead: (count) => deps.onProgress?.({ phase: "orders", step: "read", count }),
    onItems: (count) => lineItems += count,
  });
  const steps = orderImport({
    brandId,
    newId: deps.newId,
    now: deps.now(),
    copy: deps.copy,
  });
  const result: ImportResult = await importRecords(deps.sql, records, steps, {
    onWritten: (count) => deps.onProgress?.({ phase: "orders", step: "applied", count }),
  });
  return {
    orders: result.imported,
    customers: 0,
    lineItems,
    rejected: result.rejected,
    rejectedCount: result.rejected.length,
    truncated: result.rejected_truncated === true,
  };
}

/** The customers file, a batch a transaction, through {@linkcode upsertSourcedCustomers}. */
async function _applyCustomers(
  deps: ShopSyncDeps,
  brandId: string,
  body: ReadableStream<Uint8Array>,
): Promise<_Applied> {
  const applied: _Applied = {
    orders: 0,
    customers: 0,
    lineItems: 0,
    rejected: [],
    rejectedCount: 0,
    truncated: false,
  };
  const reject = (line: number, errors: string[]) => {
    applied.rejectedCount++;
    if (applied.rejected.length < _MAX_LISTED) applied.rejected.push({ line, errors });
    else applied.truncated = true;
  };
  let batch: SourcedCustomer[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const customers = batch;
    batch = [];
    await deps.sql.begin((tx) =>
      upsertSourcedCustomers(tx as unknown as Tx, { brandId, customers, now: deps.now() })
    );
    applied.customers += customers.length;
    deps.onProgress?.({ phase: "customers", step: "applied", count: applied.customers });
  };
  const records = bulkCustomerRecords(
    body,
    (count) => deps.onProgress?.({ phase: "customers", step: "read", count }),
  );
  for await (const record of records) {
    if ("errors" in record) {
      reject(record.line, record.errors);
      continue;
    }
    const value = record.value as SourcedCustomer;
    const parsed = CustomerSchema.safeParse(value.customer);
    if (!parsed.success) {
      reject(
        record.line,
        parsed.error.issues.map((i) => `customer.${i.path.join(".")}: ${i.message}`),
      );
      continue;
    }
    const updatedAt = value.updatedAt && !Number.isNaN(Date.parse(value.updatedAt))
      ? value.updatedAt
      : null;
    batch.push({ customer: value.customer, updatedAt });
    if (batch.length >= _CUSTOMER_BATCH) await flush();
  }
  await flush();
  return applied;
}
