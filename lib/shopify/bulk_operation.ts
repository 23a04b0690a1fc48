/**
 * Shopify's Bulk Operations API for queries, in its documented sequence: the
 * `bulkOperationRunQuery` mutation, then `currentBulkOperation` polled with a capped backoff
 * until the operation ends. What it produced (the JSONL at `url`) is read by bulk_jsonl.ts.
 *
 * @module
 */
import { z } from "zod";
import { DomainError } from "../errors.ts";
import type { ShopifyCredentials, ShopifyGraphql } from "./admin_client.ts";

/** A bulk operation's state, as `currentBulkOperation` reports it. */
export interface BulkOperation {
  id: string;
  status: string;
  /** Why it failed (`ACCESS_DENIED`, `INTERNAL_SERVER_ERROR`, `TIMEOUT`), else null. */
  errorCode: string | null;
  objectCount: number;
  /** The size of the file in bytes, when Shopify says. */
  fileSize: number | null;
  /** The JSONL of a COMPLETED operation; null when it found nothing. */
  url: string | null;
  /** What a failed operation produced before it stopped, when anything. */
  partialDataUrl: string | null;
  createdAt: string | null;
  completedAt: string | null;
}

/** Statuses after which an operation never changes again. */
export const FINAL_STATUSES = ["COMPLETED", "FAILED", "CANCELED", "EXPIRED"] as const;

/** What the token needs to run the backfill, in the words of a refusal. */
export const BULK_FORBIDDEN =
  "The shop's access token cannot run the backfill (it needs read_orders, read_all_orders and read_customers)";

/** Starts a bulk query; its `userErrors` are the refusals Shopify gives (one already running...). */
export const RUN_BULK_QUERY = `mutation RunBulkQuery($query: String!) {
  bulkOperationRunQuery(query: $query) {
    bulkOperation { id status }
    userErrors { field message }
  }
}`;

/** The shop's latest bulk query operation. */
export const CURRENT_BULK_OPERATION = `query CurrentBulkOperation {
  currentBulkOperation(type: QUERY) {
    id status errorCode objectCount fileSize url partialDataUrl createdAt completedAt
  }
}`;

const _RunData = z.object({
  bulkOperationRunQuery: z.object({
    bulkOperation: z.object({ id: z.string(), status: z.string() }).nullable().optional(),
    userErrors: z.array(z.object({
      field: z.array(z.string()).nullable().optional(),
      message: z.string(),
    })),
  }),
});

const _Operation = z.object({
  id: z.string(),
  status: z.string(),
  errorCode: z.string().nullable().optional(),
  objectCount: z.union([z.string(), z.number()]).nullable().optional(),
  fileSize: z.union([z.string(), z.number()]).nullable().optional(),
  url: z.string().nullable().optional(),
  partialDataUrl: z.string().nullable().optional(),
  createdAt: z.string().nullable().optional(),
  completedAt: z.string().nullable().optional(),
});
const _CurrentData = z.object({ currentBulkOperation: _Operation.nullable() });

/** Starts a bulk query; a userError is thrown as a `conflict` naming Shopify's words. */
export async function startBulkQuery(
  client: ShopifyGraphql,
  credentials: ShopifyCredentials,
  query: string,
): Promise<{ id: string; status: string }> {
  const data = _parse(
    _RunData,
    await client.graphql(credentials, RUN_BULK_QUERY, { query }, BULK_FORBIDDEN),
  );
  const { bulkOperation, userErrors } = data.bulkOperationRunQuery;
  if (userErrors.length > 0 || !bulkOperation) {
    const words = userErrors.map((e) =>
      (e.field?.length ? `${e.field.join(".")}: ` : "") +
      e.message
    );
    throw new DomainError(
      "conflict",
      `Shopify refused the bulk query: ${words.join("; ") || "no operation was created"}`,
    );
  }
  return bulkOperation;
}

/** The shop's latest bulk query operation, or null when it has none. */
export async function currentBulkOperation(
  client: ShopifyGraphql,
  credentials: ShopifyCredentials,
): Promise<BulkOperation | null> {
  const data = _parse(
    _CurrentData,
    await client.graphql(credentials, CURRENT_BULK_OPERATION, {}, BULK_FORBIDDEN),
  );
  const op = data.currentBulkOperation;
  if (!op) return null;
  return {
    id: op.id,
    status: op.status,
    errorCode: op.errorCode ?? null,
    objectCount: Number(op.objectCount ?? 0),
    fileSize: op.fileSize === null || op.fileSize === undefined ? null : Number(op.fileSize),
    url: op.url ?? null,
    partialDataUrl: op.partialDataUrl ?? null,
    createdAt: op.createdAt ?? null,
    completedAt: op.completedAt ?? null,
  };
}

/** How {@linkcode awaitBulkOperation} polls. */
export interface PollOptions {
  /** First wait between polls (default 1,000 ms); each next one is 1.5 times longer... */
  firstDelayMs?: number;
  /** ...up to this (default 15,000 ms). */
  maxDelayMs?: number;
  /** Gives up (an `unavailable` error) when the operation runs longer (default 24 hours). */
  deadlineMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Told of every poll's answer (progress: `objectCount`). */
  onPoll?: (operation: BulkOperation) => void;
}

/**
 * Polls `currentBulkOperation` until the operation `id` reaches a final status and returns it.
 * A current operation that is another one means ours was replaced (an `upstream_failed` error).
 */
export async function awaitBulkOperation(
  client: ShopifyGraphql,
  credentials: ShopifyCredentials,
  id: string,
  options: PollOptions = {},
): Promise<BulkOperation> {
  const maxDelay = options.maxDelayMs ?? 15_000;
  const deadline = Date.now() + (options.deadlineMs ?? 86_400_000);
  const sleep = options.sleep ??
    ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  let delay = Math.min(options.firstDelayMs ?? 1_000, maxDelay);
  for (;;) {
    const op = await currentBulkOperation(client, credentials);
    if (!op || op.id !== id) {
      throw new DomainError(
        "upstream_failed",
        `Shopify's current bulk operation is ${op?.id ?? "none"}, not ${id}`,
      );
    }
    options.onPoll?.(op);
    if ((FINAL_STATUSES as readonly string[]).includes(op.status)) return op;
    if (Date.now() + delay > deadline) {
      throw new DomainError("unavailable", `bulk operation ${id} is still ${op.status}`);
    }
    await sleep(delay);
    delay = Math.min(Math.ceil(delay * 1.5), maxDelay);
  }
}

/** Throws an `upstream_failed` error naming the status and `errorCode` unless COMPLETED. */
export function requireCompleted(op: BulkOperation): BulkOperation {
  if (op.status === "COMPLETED") return op;
  throw new DomainError(
    "upstream_failed",
    `bulk operation ${op.id} ended ${op.status}${op.errorCode ? ` (${op.errorCode})` : ""}`,
  );
}

function _parse<T extends z.ZodType>(schema: T, data: unknown): z.infer<T> {
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new DomainError("upstream_failed", "Shopify answered with an unexpected shape");
  }
  return parsed.data;
}
