/**
 * Membership maintenance as the forwarder runs it, as jobs on the ingest queue (either
 * implementation, so they work wherever the forwarder does): `membership_update` (the profiles
 * an applied group touched, sent by the forwarder's `afterApply` hook before the group's
 * delivery completes, so a crash loses none), `segment_refresh` (a segment created, changed or
 * deleted: its full diff) and `membership_sweep` (the time-driven segments, queued every minute
 * by {@linkcode startSweepTimer}, at most one waiting or running at a time across processes).
 *
 * The hook does not wait for the evaluation: it queues the update and starts it at once beside
 * the forwarder (eager_updates.ts: the queued job then finds it done), so the forwarder's slots
 * go on applying events while the touched profiles are evaluated, and the updates of one scope
 * that wait meanwhile, or while the forwarder has a backlog in hand, are evaluated together
 * (coalesce.ts): a backlog costs fewer, larger evaluations.
 *
 * @module
 */
import { log } from "../log.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import { membershipSweepQueuedKey } from "../store/kv_keys.ts";
import { coalesceByScope } from "./coalesce.ts";
import { createEagerUpdates } from "./eager_updates.ts";
import { type MembershipDeps, refreshSegment, updateMembership } from "./membership.ts";
import { sweepTimeDriven } from "./time_driven.ts";

/** The queue message of one segment's full re-evaluation. */
export interface SegmentRefreshMessage {
  kind: "segment_refresh";
  scope: string;
  segmentId: string;
}

/** The queue message of profiles to re-evaluate against every segment of their scope. */
export interface MembershipUpdateMessage {
  kind: "membership_update";
  scope: string;
  profileIds: string[];
  /** Names the sending process's eager run of the same update (eager_updates.ts). */
  token?: string;
}

/** Profile ids per `membership_update` message: 200 ids of 255 characters fit KV's 64 KiB. */
const _IDS_PER_MESSAGE = 200;

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
  afterApply(applied: { scope: string; profileIds: string[]; pending: number }): Promise<void>;
  jobs: Record<string, (message: unknown) => Promise<void>>;
  /** Resolves once the updates this process started at once have finished. */
  settled(): Promise<void>;
}

/**
 * Membership maintenance over `deps`, for the forwarder: `queue` carries the updates and holds
 * the sweep's marker.
 */
export function membershipForwarding(
  deps: MembershipDeps,
  queue: Pick<IngestQueue, "kv" | "send">,
): MembershipForwarding {
  const update = coalesceByScope(async (scope, profileIds) => {
    await updateMembership(deps, scope, profileIds);
  });
  const eager = createEagerUpdates((err) =>
    log("warn", "membership update failed; its queued job retries it", { error: String(err) })
  );
  return {
    async afterApply({ scope, profileIds, pending }) {
      const messages: MembershipUpdateMessage[] = [];
      for (let i = 0; i < profileIds.length; i += _IDS_PER_MESSAGE) {
        messages.push({
          kind: "membership_update",
          scope,
          profileIds: profileIds.slice(i, i + _IDS_PER_MESSAGE),
          token: crypto.randomUUID(),
        });
      }
      eager.start(messages.map((m) => m.token!), () => update({ scope, profileIds, pending }));
      for (const message of messages) {
        if (!await queue.send(message)) throw new Error("membership update not queued");
      }
    },
    settled: () => eager.settled(),
    jobs: {
      async membership_update(message) {
        const m = message as Partial<MembershipUpdateMessage>;
        if (typeof m.scope !== "string" || !Array.isArray(m.profileIds)) {
          log("error", "malformed membership_update message dropped");
          return;
        }
        if (await eager.claim(m.token)) return;
        await update({ scope: m.scope, profileIds: m.profileIds.map(String) });
      },
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
