import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv, RequestMeter } from "./app_env.ts";
import { HttpError } from "./errors.ts";
import { createGroupCommit, type GroupCommit } from "./kv_group_commit.ts";
import { usageDailyKey, usageDailyPrefix, usageRecordKey } from "./kv_keys.ts";

// Per-request records are for audits and disputes; the daily sums are kept forever.
const _RECORD_TTL_MS = 90 * 24 * 3600 * 1000;

/** One metered request. */
export interface UsageRecord {
  request_id: string;
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
export function usageMeter(
  deps: { kv: Deno.Kv; now: () => Date },
  options: { commit?: GroupCommit } = {},
): MiddlewareHandler<AppEnv> {
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
      const status = thrown === undefined
        ? c.res.status
        : thrown instanceof HttpError
        ? thrown.status
        : 500;
      await _commitMeter(deps, commit, c, meter, status);
    }
    if (thrown !== undefined) throw thrown;
  };
}

async function _commitMeter(
  deps: { now: () => Date },
  commit: GroupCommit,
  c: Context<AppEnv>,
  meter: RequestMeter,
  status: number,
): Promise<void> {
  if (!c.get("auth") && meter.writes.length === 0) return;
  const at = deps.now();
  try {
    await commit.commit((op) => meterInto(c, op, status, at));
  } catch (err) {
    // Metering must never fail a request that already succeeded.
    console.error(JSON.stringify({
      level: "error",
      request_id: c.get("requestId"),
      message: "usage metering failed",
      error: String(err),
    }));
  }
}

/**
 * Adds the request's pending limiter counts and, for an authenticated request, its usage record
 * (with `status`) to `op`; false when there is no caller to meter. After `op` commits, the
 * caller sets `c.var.meter.done` so the middleware writes nothing more.
 */
export function meterInto(
  c: Context<AppEnv>,
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
