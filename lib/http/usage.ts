/**
 * Usage metering of the pipeline: one record and one daily count per authenticated request,
 * committed with the limiters' counts in one KV write. Declares the `meter` context variable.
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import type { RequestIdVariables } from "./request_id.ts";
import type { AuthVariables } from "./auth.ts";
import { toHttpError } from "./errors.ts";
import { log } from "../log.ts";
import { createGroupCommit, type GroupCommit, type KvWrite } from "../store/kv_group_commit.ts";
import { usageDailyKey, usageDailyPrefix, usageRecordKey } from "../store/kv_keys.ts";

/**
 * What the usage meter collects while a request runs: the limiters' counts are committed with
 * the usage record in one KV write, or with the ingest queue's own commit (`done` then).
 */
export interface RequestMeter {
  started: Date;
  writes: KvWrite[];
  done: boolean;
}

/** The context variable {@linkcode usageMeter} sets. */
export interface MeterVariables {
  /** The request's usage meter: writes to fold into its one KV commit. */
  meter: RequestMeter;
}

/** A Hono environment holding at least what the meter reads and sets. */
export type MeterEnv = { Variables: MeterVariables & AuthVariables & RequestIdVariables };

// Per-request records are for audits and disputes; the daily sums are kept forever.
const _RECORD_TTL_MS = 90 * 24 * 3600 * 1000;

/** One metered request. */
export interface UsageRecord {
  /** The server's id of the request (the record's KV key): one record per request. */
  request_id: string;
  /** The caller's `X-Request-Id`, when it sent a safe one: for the caller's own correlation. */
  client_request_id: string | null;
  key_id: string;
  method: string;
  route: string;
  family: string;
  status: number;
  at: string;
  duration_ms: number;
}

/** The route family a path is billed under: `/cdp/query/profile/count` → `query`. */
export function routeFamily(path: string): string {
  const [, root, family] = path.split("/");
  return root === "cdp" && family ? family : (root || "root");
}

/**
 * Meters every authenticated request, whatever its outcome: one record per request plus an
 * atomic per-brand, per-day, per-family counter, written in one KV transaction together with
 * the limiters' counts of the request (`c.var.meter.writes`). A handler that commits its own KV
 * transaction can fold all of it into that one instead ({@linkcode meterInto}).
 */
export function usageMeter<E extends MeterEnv = MeterEnv>(
  deps: { kv: Deno.Kv; now: () => Date },
  options: { commit?: GroupCommit } = {},
): MiddlewareHandler<E> {
  const commit = options.commit ?? createGroupCommit(deps.kv);
  return async function usageMeterMiddleware(c, next) {
    const meter: RequestMeter = { started: deps.now(), writes: [], done: false };
    c.set("meter", meter);
    // A middleware after this one (a limiter's 429) throws past it to the root onError: it is
    // metered with its status all the same, then rethrown.
    let thrown: unknown = undefined;
    try {
      await next();
    } catch (err) {
      thrown = err ?? new Error("unknown error");
    }
    if (!meter.done) {
      const status = thrown === undefined ? c.res.status : toHttpError(thrown).status;
      await _commitMeter(deps, commit, c, meter, status);
    }
    if (thrown !== undefined) throw thrown;
  };
}

async function _commitMeter<E extends MeterEnv>(
  deps: { now: () => Date },
  commit: GroupCommit,
  c: Context<E>,
  meter: RequestMeter,
  status: number,
): Promise<void> {
  if (!c.get("auth") && meter.writes.length === 0) return;
  const at = deps.now();
  try {
    await commit.commit((op) => meterInto(c, op, status, at));
  } catch (err) {
    // Metering must never fail a request that already succeeded.
    log("error", "usage metering failed", { request_id: c.get("requestId"), error: String(err) });
  }
}

/**
 * Adds the request's pending limiter counts and, for an authenticated request, its usage record
 * (with `status`) to `op`; false when there is no caller to meter. After `op` commits, the
 * caller sets `c.var.meter.done` so the middleware writes nothing more.
 */
export function meterInto<E extends MeterEnv>(
  c: Context<E>,
  op: Deno.AtomicOperation,
  status: number,
  at: Date,
): boolean {
  const meter = c.get("meter");
  for (const write of meter?.writes ?? []) write(op);
  const auth = c.get("auth");
  if (!auth || !meter) return false;
  const day = at.toISOString().slice(0, 10);
  const family = routeFamily(c.req.path);
  const record: UsageRecord = {
    request_id: c.get("requestId"),
    client_request_id: c.get("clientRequestId") ?? null,
    key_id: auth.keyId,
    method: c.req.method,
    route: c.req.routePath,
    family,
    status,
    at: at.toISOString(),
    duration_ms: at.getTime() - meter.started.getTime(),
  };
  op.set(usageRecordKey(auth.brandId, day, record.request_id), record, {
    expireIn: _RECORD_TTL_MS,
  }).sum(usageDailyKey(auth.brandId, day, family), 1n);
  return true;
}

/** Daily request counts of one brand between two `YYYY-MM-DD` days (inclusive). */
export async function summarizeUsage(
  kv: Deno.Kv,
  brandId: string,
  range: { from?: string; to?: string } = {},
): Promise<{ day: string; family: string; requests: number }[]> {
  const rows: { day: string; family: string; requests: number }[] = [];
  const prefix = usageDailyPrefix(brandId);
  const selector = {
    start: [...prefix, range.from ?? ""],
    end: [...prefix, `${range.to ?? "9999-12-31"}\uffff`],
  };
  for await (const entry of kv.list<Deno.KvU64>(selector)) {
    const [, , , day, family] = entry.key as string[];
    rows.push({ day: day!, family: family!, requests: Number(entry.value.value) });
  }
  return rows;
}
