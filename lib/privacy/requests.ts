/**
 * Data-subject requests: recorded (with their audit row), queued on the ingest queue as a job
 * (`kind: "privacy_request"`, run by the forwarder like `shop_sync`), claimed, run and completed
 * with their counts. A request's identifier is personal data: an erase clears it when it
 * completes, and the audit keeps only its keyed hash.
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import { log } from "../log.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import type { ReadBudget } from "../engine/segments.ts";
import type { Sql, Tx } from "../store/db.ts";
import { erasePerson, type Eraser } from "./erase.ts";
import { buildExport } from "./export.ts";
import { classifyIdentifier, type Identifier, type IdentifierHasher } from "./identifiers.ts";
import { findPerson } from "./person.ts";
import { suppressPerson, unsuppressPerson } from "./suppression.ts";

/** What a request asks. */
export const PRIVACY_REQUEST_TYPES = ["erase", "export", "suppress", "unsuppress"] as const;
/** A request's type. */
export type PrivacyRequestType = (typeof PRIVACY_REQUEST_TYPES)[number];
/** Where a request is. */
export const PRIVACY_REQUEST_STATUSES = ["pending", "running", "completed", "failed"] as const;

/** A request as the API shows it. */
export interface PrivacyRequestView {
  id: string;
  type: PrivacyRequestType;
  status: (typeof PRIVACY_REQUEST_STATUSES)[number];
  /** As sent; null once an erase completed (the person's identifier is not kept). */
  identifier: string | null;
  requested_by: string;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  /** What was found and removed (or blocked, exported); `dropped`: events dropped since. */
  counts: Record<string, number>;
  error: string | null;
  /** For a completed export: whether its document can be downloaded. */
  download_available: boolean;
}

/** The queue message of a request. */
export interface PrivacyRequestMessage {
  kind: "privacy_request";
  brandId: string;
  requestId: string;
}

/** Whether a queue message is a privacy request job. */
export function isPrivacyRequestMessage(message: unknown): message is PrivacyRequestMessage {
  const m = message as Partial<PrivacyRequestMessage> | null;
  return m?.kind === "privacy_request" && typeof m.brandId === "string" &&
    typeof m.requestId === "string";
}

/** What recording a request needs. */
export interface RequestDeps {
  sql: Sql;
  queue: Pick<IngestQueue, "send">;
  now: () => Date;
  newId: () => string;
  hasher: IdentifierHasher;
}

/** A request to record. */
export interface NewRequest {
  brandId: string;
  scope: string;
  type: PrivacyRequestType;
  identifier: string;
  /** More identifiers of the same person (Shopify's redact: email and phone besides the id). */
  extraIdentifiers?: string[];
  /** Who asked: `key:<id>`, `shopify:<topic>`, `operator`. */
  requestedBy: string;
  /** Non-personal details: Shopify's `orders_to_redact` ids. */
  details?: { orderIds?: string[] };
}

/**
 * Records a request `pending` with its audit row in `tx` (a webhook's transaction: the caller
 * queues it after the commit with {@linkcode queueRequest}); answers its id.
 */
export async function recordRequest(
  tx: Tx,
  deps: Pick<RequestDeps, "now" | "newId" | "hasher">,
  input: NewRequest,
): Promise<string> {
  const id = deps.newId();
  const now = deps.now();
  const hash = deps.hasher.hash(classifyIdentifier(input.identifier));
  await tx`
    insert into privacy_requests (id, brand_id, scope, type, status, identifier,
                                  extra_identifiers, identifier_hash, requested_by, details,
                                  created_at)
    values (${id}, ${input.brandId}, ${input.scope}, ${input.type}, 'pending',
            ${input.identifier}, ${input.extraIdentifiers ?? []}::text[], ${hash},
            ${input.requestedBy}, ${tx.json(input.details ?? {})}, ${now})`;
  await tx`
    insert into privacy_audit (request_id, brand_id, type, requested_by, identifier_hash,
                               requested_at, outcome)
    values (${id}, ${input.brandId}, ${input.type}, ${input.requestedBy}, ${hash}, ${now},
            'pending')`;
  return id;
}

/** Records a request (see {@linkcode recordRequest}) and queues it; answers it as recorded. */
export async function createRequest(
  deps: RequestDeps,
  input: NewRequest,
): Promise<PrivacyRequestView> {
  const id = await deps.sql.begin((tx) => recordRequest(tx as unknown as Tx, deps, input));
  await queueRequest(deps, { brandId: input.brandId, requestId: id });
  return (await getRequest(deps.sql, input.brandId, id))!;
}

/**
 * Queues a recorded request. A failure is only logged: the request stays `pending` and the
 * minutely upkeep queues it again ({@linkcode requeueStaleRequests}).
 */
export async function queueRequest(
  deps: Pick<RequestDeps, "queue">,
  target: { brandId: string; requestId: string },
): Promise<void> {
  const message: PrivacyRequestMessage = { kind: "privacy_request", ...target };
  try {
    if (!await deps.queue.send(message)) throw new Error("the queue refused the message");
  } catch (err) {
    log("warn", "privacy request not queued; the upkeep will", {
      request: target.requestId,
      error: String(err),
    });
  }
}

interface _RequestRow {
  id: string;
  brand_id: string;
  scope: string;
  type: PrivacyRequestType;
  status: PrivacyRequestView["status"];
  identifier: string | null;
  extra_identifiers: string[];
  requested_by: string;
  details: { orderIds?: string[] };
  counts: Record<string, number>;
  dropped: string;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  has_export: boolean;
}

const _COLUMNS = (sql: Sql) =>
  sql`r.id, r.brand_id, r.scope, r.type, r.status, r.identifier, r.extra_identifiers,
      r.requested_by, r.details, r.counts, r.dropped::text as dropped, r.error, r.created_at,
      r.started_at, r.completed_at,
      exists (select 1 from privacy_exports e where e.request_id = r.id) as has_export`;

function _view(row: _RequestRow): PrivacyRequestView {
  const dropped = Number(row.dropped);
  const blocks = row.type === "erase" || row.type === "suppress";
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    identifier: row.identifier,
    requested_by: row.requested_by,
    created_at: row.created_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    completed_at: row.completed_at?.toISOString() ?? null,
    counts: blocks ? { ...row.counts, dropped } : row.counts,
    error: row.error,
    download_available: row.has_export,
  };
}

/** One of the brand's requests, or null (another brand's too). */
export async function getRequest(
  sql: Sql,
  brandId: string,
  id: string,
): Promise<PrivacyRequestView | null> {
  const [row] = await sql<_RequestRow[]>`
    select ${_COLUMNS(sql)} from privacy_requests r where r.brand_id = ${brandId} and r.id = ${id}`;
  return row ? _view(row) : null;
}

/** A page of the brand's requests, newest first. */
export async function listRequests(
  sql: Sql,
  brandId: string,
  page: { limit: number; offset: number; type?: PrivacyRequestType },
): Promise<{ list: PrivacyRequestView[]; total: number }> {
  const type = page.type ? sql`and r.type = ${page.type}` : sql``;
  const rows = await sql<_RequestRow[]>`
    select ${_COLUMNS(sql)} from privacy_requests r
    where r.brand_id = ${brandId} ${type}
    order by r.created_at desc, r.id desc limit ${page.limit} offset ${page.offset}`;
  const [count] = await sql<{ n: number }[]>`
    select count(*)::int as n from privacy_requests r where r.brand_id = ${brandId} ${type}`;
  return { list: rows.map(_view), total: count!.n };
}

/** A completed export's document (JSON text), or null: unknown, another brand's, not ready. */
export async function exportDocument(
  sql: Sql,
  brandId: string,
  id: string,
): Promise<string | null> {
  const [row] = await sql<{ document: string }[]>`
    select e.document from privacy_exports e join privacy_requests r on r.id = e.request_id
    where r.brand_id = ${brandId} and r.id = ${id}`;
  return row?.document ?? null;
}

/** What running requests needs. */
export interface PrivacyJobDeps {
  sql: Sql;
  now: () => Date;
  hasher: () => Promise<IdentifierHasher>;
  /** The budget of an export's segment memberships (the brand's conditions). */
  exportBudget: ReadBudget;
  /** More places an erase removes the person from (see lib/privacy/erase.ts). */
  erasers?: Readonly<Record<string, Eraser>>;
}

/** A running request whose run has not ended after this long is taken as lost. */
export const RUNNING_LEASE_MS = 10 * 60_000;

/**
 * The job's handler. At least once: a request already completed or failed is skipped, one
 * running elsewhere (within its lease) too; every step is idempotent, so a redelivery after a
 * crash runs it again. A refusal a retry cannot change fails the request; anything else
 * (the database unreachable) is thrown, so the queue redelivers it.
 */
export function createPrivacyJob(deps: PrivacyJobDeps): (message: unknown) => Promise<void> {
  return async (message) => {
    if (!isPrivacyRequestMessage(message)) {
      log("error", "malformed privacy_request message dropped");
      return;
    }
    const now = deps.now();
    const leaseStart = new Date(now.getTime() - RUNNING_LEASE_MS);
    const [row] = await deps.sql<_RequestRow[]>`
      update privacy_requests r set status = 'running', started_at = ${now}
      where r.id = ${message.requestId} and r.brand_id = ${message.brandId}
        and (r.status = 'pending' or (r.status = 'running' and r.started_at < ${leaseStart}))
      returning ${_COLUMNS(deps.sql)}`;
    if (!row) return;
    try {
      await _run(deps, row);
    } catch (err) {
      if (err instanceof DomainError) {
        await _finish(deps, row, { error: err.message });
        return;
      }
      // Free for the redelivery at once (if the database lets us; else the lease ends).
      await deps.sql`update privacy_requests set status = 'pending' where id = ${row.id}`
        .catch(() => {});
      throw err;
    }
  };
}

async function _run(deps: PrivacyJobDeps, row: _RequestRow): Promise<void> {
  const hasher = await deps.hasher();
  const identifiers: Identifier[] = [row.identifier!, ...row.extra_identifiers].map(
    classifyIdentifier,
  );
  const brand = { brandId: row.brand_id, scope: row.scope };
  const base = { ...brand, requestId: row.id, identifiers };
  switch (row.type) {
    case "erase": {
      const counts = await erasePerson({ ...deps, hasher }, {
        ...base,
        orderIds: row.details.orderIds ?? [],
      });
      return await _finish(deps, row, { counts });
    }
    case "export": {
      const person = await findPerson(deps.sql, brand, identifiers);
      const built = await buildExport(deps.sql, {
        ...brand,
        person,
        now: deps.now(),
        budget: deps.exportBudget,
      });
      return await _finish(deps, row, { counts: built.counts, document: built.document });
    }
    case "suppress":
      return await _finish(deps, row, {
        counts: await suppressPerson({ sql: deps.sql, hasher }, base),
      });
    case "unsuppress":
      return await _finish(deps, row, {
        counts: await unsuppressPerson({ sql: deps.sql, hasher }, base),
      });
  }
}

/** Completes (or fails) a request, with its audit row, in one transaction. */
async function _finish(
  deps: Pick<PrivacyJobDeps, "sql" | "now">,
  row: _RequestRow,
  outcome: { counts?: Record<string, number>; document?: string; error?: string },
): Promise<void> {
  const now = deps.now();
  const status = outcome.error === undefined ? "completed" : "failed";
  const counts = outcome.counts ?? {};
  await deps.sql.begin(async (sql) => {
    const tx = sql as unknown as Tx;
    // An erased person's identifiers are not kept once the erase is done.
    const forget = row.type === "erase" && status === "completed";
    await tx`
      update privacy_requests
      set status = ${status}, counts = ${tx.json(counts)}, error = ${outcome.error ?? null},
          completed_at = ${now},
          identifier = case when ${forget} then null else identifier end,
          extra_identifiers = case when ${forget} then '{}'::text[] else extra_identifiers end
      where id = ${row.id}`;
    if (outcome.document !== undefined) {
      await tx`
        insert into privacy_exports (request_id, document, created_at)
        values (${row.id}, ${outcome.document}, ${now})
        on conflict (request_id) do update set document = excluded.document`;
    }
    await tx`
      update privacy_audit set outcome = ${status}, counts = ${tx.json(counts)},
                               completed_at = ${now}
      where request_id = ${row.id}`;
  });
}

/**
 * Queues again the requests whose message was lost: pending for over a minute, or running past
 * their lease. Answers how many it queued.
 */
export async function requeueStaleRequests(
  deps: Pick<RequestDeps, "sql" | "queue" | "now">,
): Promise<number> {
  const now = deps.now().getTime();
  const rows = await deps.sql<{ id: string; brand_id: string }[]>`
    select id, brand_id from privacy_requests
    where (status = 'pending' and created_at < ${new Date(now - 60_000)})
       or (status = 'running' and started_at < ${new Date(now - RUNNING_LEASE_MS)})
    order by created_at limit 100`;
  for (const row of rows) await queueRequest(deps, { brandId: row.brand_id, requestId: row.id });
  return rows.length;
}
