/**
 * Coalescing the forwarder's membership work per scope: while one evaluation of a scope's
 * touched profiles runs, the groups applied meanwhile wait together, and the next evaluation
 * takes all their profiles at once. Each caller resolves once an evaluation that started after
 * its call (so after its group committed) has committed, so a delivery still completes only
 * after its profiles' memberships are written. Without it, concurrent groups of one brand
 * would queue one by one on the scope's membership lock, each holding a connection.
 *
 * @module
 */

interface _Waiting {
  ids: Set<string>;
  callers: { resolve: () => void; reject: (err: unknown) => void }[];
}

/**
 * Wraps `run` (one scope's evaluation of a set of profile ids) so that calls of one scope
 * arriving while it runs are merged into its next run; at most one run per scope at a time.
 */
export function coalesceByScope(
  run: (scope: string, profileIds: string[]) => Promise<void>,
): (applied: { scope: string; profileIds: string[] }) => Promise<void> {
  const waiting = new Map<string, _Waiting>();
  const running = new Set<string>();
  const drain = async (scope: string) => {
    running.add(scope);
    try {
      for (let next = waiting.get(scope); next; next = waiting.get(scope)) {
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
  return ({ scope, profileIds }) =>
    new Promise<void>((resolve, reject) => {
      let entry = waiting.get(scope);
      if (!entry) waiting.set(scope, entry = { ids: new Set(), callers: [] });
      for (const id of profileIds) entry.ids.add(id);
      entry.callers.push({ resolve, reject });
      if (!running.has(scope)) void drain(scope);
    });
}
