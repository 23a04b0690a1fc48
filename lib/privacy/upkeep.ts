/**
 * The minutely privacy upkeep (main.ts's cron): queues again the requests whose message was lost,
 * and enforces event retention where it is due.
 *
 * @module
 */
import { log } from "../log.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import type { Sql } from "../store/db.ts";
import { requeueStaleRequests } from "./requests.ts";
import { enforceRetention } from "./retention.ts";

/** One round of the upkeep; a failure is logged, and the next round tries again. */
export async function privacyUpkeep(
  deps: { sql: Sql; queue: Pick<IngestQueue, "send">; now: () => Date },
): Promise<void> {
  try {
    const requeued = await requeueStaleRequests(deps);
    const retention = await enforceRetention(deps.sql, deps.now());
    if (requeued > 0 || retention.brands > 0) {
      log("info", "privacy upkeep", { requeued, ...retention });
    }
  } catch (err) {
    log("error", "privacy upkeep failed", { error: String(err) });
  }
}
