import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./app_env.ts";
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
 * atomic per-brand, per-day, per-family counter, written in one KV transaction.
 */
export function usageMeter(deps: { kv: Deno.Kv; now: () => Date }): MiddlewareHandler<AppEnv> {
  return async function usageMeterMiddleware(c, next) {
    const started = deps.now();
    await next();
    const auth = c.get("auth");
    if (!auth) return;
    const at = deps.now();
    const day = at.toISOString().slice(0, 10);
    const family = routeFamily(c.req.path);
    const record: UsageRecord = {
      request_id: c.get("requestId"),
      key_id: auth.keyId,
      method: c.req.method,
      route: c.req.routePath,
      family,
      status: c.res.status,
      at: at.toISOString(),
      duration_ms: at.getTime() - started.getTime(),
    };
    try {
      await deps.kv.atomic()
        .set(usageRecordKey(auth.brandId, day, record.request_id), record, {
          expireIn: _RECORD_TTL_MS,
        })
        .sum(usageDailyKey(auth.brandId, day, family), 1n)
        .commit();
    } catch (err) {
      // Metering must never fail a request that already succeeded.
      console.error(JSON.stringify({
        level: "error",
        request_id: record.request_id,
        message: "usage metering failed",
        error: String(err),
      }));
    }
  };
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
