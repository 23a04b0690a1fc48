/**
 * Membership maintenance as the forwarder runs it: the hook after each applied group, and two
 * jobs sent on the ingest queue (either implementation, so they work wherever the forwarder
 * does): `segment_refresh` (a segment created, changed or deleted: its full diff) and
 * `membership_sweep` (the time-driven segments, queued every minute by
 * {@linkcode startSweepTimer}, at most one waiting or running at a time across processes).
 *
 * @module
 */
import { log } from "../log.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import { membershipSweepQueuedKey } from "../store/kv_keys.ts";
import { type MembershipDeps, refreshSegment, updateMembership } from "./membership.ts";
import { sweepTimeDriven } from "./time_driven.ts";

/** The queue message of one segment's full re-evaluation. */
export interface SegmentRefreshMessage {
  kind: "segment_refresh";
  scope: string;
  segmentId: string;
}

/** The queue message of a sweep of the time-driven segments. */
export interface MembershipSweepMessage {
  kind: "membership_sweep";
}

/** How often the time-driven segments are swept. */
export const SWEEP_INTERVAL_MS = 60_000;

/** A queued sweep older than this is taken as lost: its marker no longer holds the next one. */
const _SWEEP_QUEUED_TTL_MS = 10 * 60_000;

/** Queues the full re-evaluation of a segment (after it was created, changed or deleted). */
export async function enqueueSegmentRefresh(
  queue: Pick<IngestQueue, "send">,
  scope: string,
  segmentId: string,
): Promise<boolean> {
  const message: SegmentRefreshMessage = { kind: "segment_refresh", scope, segmentId };
  return await queue.send(message);
}

/** Queues a sweep unless one is waiting or running; answers whether it queued one. */
export async function enqueueSweep(
  queue: Pick<IngestQueue, "kv" | "send">,
  now: Date,
): Promise<boolean> {
  const key = membershipSweepQueuedKey();
  const current = await queue.kv.get<string>(key);
  if (current.value && now.getTime() - Date.parse(current.value) < _SWEEP_QUEUED_TTL_MS) {
    return false;
  }
  const message: MembershipSweepMessage = { kind: "membership_sweep" };
  return await queue.send(message, {
    with: (op) => op.check(current).set(key, now.toISOString(), { expireIn: _SWEEP_QUEUED_TTL_MS }),
  });
}

/** Queues a sweep every {@linkcode SWEEP_INTERVAL_MS}; answers the function that stops it. */
export function startSweepTimer(
  queue: Pick<IngestQueue, "kv" | "send">,
  now: () => Date,
): () => void {
  const timer = setInterval(() => {
    enqueueSweep(queue, now()).catch((err) =>
      log("error", "membership sweep not queued", { error: String(err) })
    );
  }, SWEEP_INTERVAL_MS);
  // The timer alone never keeps a process alive.
  Deno.unrefTimer(timer);
  return () => clearInterval(timer);
}

/** The forwarder's side of membership: its `afterApply` hook and its jobs by message kind. */
export interface MembershipForwarding {
  afterApply(applied: { scope: string; profileIds: string[] }): Promise<void>;
  jobs: Record<string, (message: unknown) => Promise<void>>;
}

/** Membership maintenance over `deps`, for the forwarder (`queue`: the sweep's marker). */
export function membershipForwarding(
  deps: MembershipDeps,
  queue: Pick<IngestQueue, "kv">,
): MembershipForwarding {
  return {
    async afterApply({ scope, profileIds }) {
      await updateMembership(deps, scope, profileIds);
    },
    jobs: {
      async segment_refresh(message) {
        const m = message as Partial<SegmentRefreshMessage>;
        if (typeof m.scope !== "string" || typeof m.segmentId !== "string") {
          log("error", "malformed segment_refresh message dropped");
          return;
        }
        const done = await refreshSegment(deps, m.scope, m.segmentId);
        log("info", "segment membership refreshed", { segment: m.segmentId, ...done });
      },
      async membership_sweep() {
        try {
          const done = await sweepTimeDriven(deps);
          if (done.segments > 0) log("info", "time-driven segments swept", { ...done });
        } finally {
          await queue.kv.delete(membershipSweepQueuedKey());
        }
      },
    },
  };
}
