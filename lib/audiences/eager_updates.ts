/**
 * Membership updates run at once in the process that applied the events, with their queued
 * messages as the backstop. The forwarder's hook queues an update (durable: a crash loses none)
 * and starts the same update here without waiting for the queue to hand the message back, which
 * on an idle queue can take a polling interval. When the message arrives in this process after
 * its eager run committed, its job has nothing left to do; a run that failed, a message handed
 * to another process or one outliving the process's memory is evaluated in full, which changes
 * nothing twice (the writers write only a diff).
 *
 * @module
 */

/** Tokens remembered at most: past it the oldest are forgotten (their jobs evaluate again). */
const _REMEMBERED = 10_000;

/** Eager runs keyed by the tokens of their queued messages. */
export interface EagerUpdates {
  /** Starts `run` now for the messages carrying `tokens`; never waits for it nor throws. */
  start(tokens: readonly string[], run: () => Promise<void>): void;
  /**
   * Whether the eager run of the message carrying `token` committed (waiting for it if it is
   * still running); false when this process ran none for it, or it failed. Forgets the token.
   */
  claim(token: string | undefined): Promise<boolean>;
  /** Resolves once every run started so far has finished (shutdown, benchmarks, tests). */
  settled(): Promise<void>;
}

/** Eager runs remembering up to `remembered` tokens; `onError` hears a failed run. */
export function createEagerUpdates(
  onError: (err: unknown) => void,
  remembered = _REMEMBERED,
): EagerUpdates {
  const runs = new Map<string, Promise<boolean>>();
  const running = new Set<Promise<boolean>>();
  return {
    start(tokens, run) {
      const outcome = run().then(() => true, (err) => {
        onError(err);
        return false;
      });
      running.add(outcome);
      void outcome.finally(() => running.delete(outcome));
      for (const token of tokens) runs.set(token, outcome);
      for (const token of runs.keys()) {
        if (runs.size <= remembered) break;
        runs.delete(token);
      }
    },
    async claim(token) {
      const outcome = token === undefined ? undefined : runs.get(token);
      if (!outcome) return false;
      runs.delete(token!);
      return await outcome;
    },
    async settled() {
      await Promise.all(running);
    },
  };
}
