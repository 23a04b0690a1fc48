/**
 * Coalescing the forwarder's membership work per scope: while one evaluation of a scope's
 * touched profiles runs, the groups applied meanwhile wait together, and the next evaluation
 * takes all their profiles at once. Each caller resolves once an evaluation that started after
 * its call (so after its group committed) has committed, so a delivery still completes only
 * after its profiles' memberships are written. Without it, concurrent groups of one brand
 * would queue one by one on the scope's membership lock, each holding a connection.
 *
 * While the forwarder has a backlog in hand, an evaluation also waits for company: every
 * evaluation pays a fixed cost (its round trips, compiling and sending the brand's conditions)
 * whatever its size, and in a drain of many small groups that cost, paid per group, is most of
 * membership's. It waits while more messages follow than profiles wait (up to a batch), and at
 * most a bounded time, so the batches shrink as the backlog does and the last groups' profiles
 * are evaluated at once, as few as they are: the end of a drain is not kept waiting.
 *
 * @module
 */

/** When an evaluation waits for company. */
export interface CoalescePolicy {
  /**
   * While the latest caller says at least this many messages follow (`pending`), an evaluation
   * waits...
   */
  busyPending: number;
  /** ...until as many profiles wait as messages follow, or this many... */
  batchProfiles: number;
  /** ...or the first of them has waited this long. */
  maxWaitMs: number;
}

/** The forwarder's default: a group's worth of messages following, 500 profiles, 200 ms. */
export const COALESCE_POLICY: CoalescePolicy = {
  busyPending: 16,
  batchProfiles: 500,
  maxWaitMs: 200,
};

/** What a caller adds: profiles of a scope, and how many messages the forwarder has after it. */
export interface CoalescedCall {
  scope: string;
  profileIds: string[];
  /** Messages the caller knows will follow soon (0, or absent: none, run at once). */
  pending?: number;
}

interface _Waiting {
  ids: Set<string>;
  callers: { resolve: () => void; reject: (err: unknown) => void }[];
  pending: number;
  since: number;
  /** Wakes a run waiting for company to look again (a call arrived). */
  wake?: () => void;
}

/**
 * Wraps `run` (one scope's evaluation of a set of profile ids) so that calls of one scope
 * arriving while it runs, or while it waits for company under `policy`, are merged into its
 * next run; at most one run per scope at a time.
 */
export function coalesceByScope(
  run: (scope: string, profileIds: string[]) => Promise<void>,
  policy: CoalescePolicy = COALESCE_POLICY,
): (call: CoalescedCall) => Promise<void> {
  const waiting = new Map<string, _Waiting>();
  const running = new Set<string>();
  const holds = (entry: _Waiting) =>
    entry.pending >= policy.busyPending &&
    entry.ids.size < Math.min(policy.batchProfiles, entry.pending) &&
    performance.now() - entry.since < policy.maxWaitMs;
  /** Resolves on the entry's next call, or once its first caller has waited the longest wait. */
  const nextCall = (entry: _Waiting) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        entry.wake = undefined;
        resolve();
      }, policy.maxWaitMs - (performance.now() - entry.since));
      entry.wake = () => {
        clearTimeout(timer);
        entry.wake = undefined;
        resolve();
      };
    });
  const drain = async (scope: string) => {
    running.add(scope);
    try {
      for (let next = waiting.get(scope); next; next = waiting.get(scope)) {
        while (holds(next)) await nextCall(next);
        waiting.delete(scope);
        try {
          await run(scope, [...next.ids]);
          for (const caller of next.callers) caller.resolve();
        } catch (err) {
          for (const caller of next.callers) caller.reject(err);
        }
      }
    } finally {
      running.delete(scope);
    }
  };
  return ({ scope, profileIds, pending = 0 }) =>
    new Promise<void>((resolve, reject) => {
      let entry = waiting.get(scope);
      if (!entry) {
        waiting.set(
          scope,
          entry = { ids: new Set(), callers: [], pending, since: performance.now() },
        );
      }
      for (const id of profileIds) entry.ids.add(id);
      entry.callers.push({ resolve, reject });
      entry.pending = pending;
      entry.wake?.();
      if (!running.has(scope)) void drain(scope);
    });
}
