/**
 * The one batching layer: concurrent callers' items share commits (a KV transaction, a database
 * transaction), with one failure path. Used wherever work meets a commit: the ingest queue's
 * accepts (lib/ingest/queue.ts), the forwarder's transactions (lib/ingest/forwarder.ts) and the
 * KV group commit of usage records (kv_group_commit.ts).
 *
 * @module
 */

/** How a {@linkcode createBatcher} groups its items and commits a group. */
export interface BatcherOptions<T> {
  /**
   * Commits the items of one group together, all or none: throws when none was committed. A
   * group holds at least one item.
   */
  commit(items: T[]): Promise<void>;
  /** Items in one group at most. */
  maxItems: number;
  /** What an item weighs (default 0); a group's weight stays within `maxWeight` (its first item aside). */
  weight?(item: T): number;
  maxWeight?: number;
  /** Items group only with items of the same key (default: all alike). */
  key?(item: T): string;
  /** Groups committing at once (default 1). */
  concurrency?: number;
  /** How long a group about to be taken waits for company, with `waiting` items ready (default 0). */
  linger?(waiting: number): number;
  /**
   * Whether a failed group of several items is committed again item by item (default: always).
   * False for a failure no item can have caused, which each would meet again (an unreachable
   * store): every item of the group fails at once.
   */
  isolates?(err: unknown): boolean;
}

/** Adds an item; settles once it is committed (or fails with its own group's error). */
export type Batcher<T> = (item: T) => Promise<void>;

interface _Waiting<T> {
  item: T;
  weight: number;
  key: string;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * A batcher over `options.commit`. While `concurrency` groups are committing, the items that
 * arrive wait; the next free turn takes the oldest waiting item and, in arrival order, those of
 * its key that fit (`maxItems`, `maxWeight`) into one group. An idle batcher commits a lone item
 * at once (after `linger`, when that says to wait).
 *
 * Failure path, the only one: when a group of several items fails, each of its items comes back
 * as a group of one through the same commit, in the same turn, so one item's problem is never
 * its neighbours'; a group of one that fails fails its item. `isolates` may say a failure is
 * nobody's own, and then every item of the group fails with it.
 */
export function createBatcher<T>(options: BatcherOptions<T>): Batcher<T> {
  const waiting: _Waiting<T>[] = [];
  const limit = options.concurrency ?? 1;
  const maxWeight = options.maxWeight ?? Infinity;
  let running = 0;

  const settle = async (group: _Waiting<T>[]): Promise<void> => {
    try {
      await options.commit(group.map((w) => w.item));
    } catch (err) {
      if (group.length === 1 || !(options.isolates?.(err) ?? true)) {
        for (const w of group) w.reject(err);
        return;
      }
      for (const w of group) await settle([w]);
      return;
    }
    for (const w of group) w.resolve();
  };

  const take = (): _Waiting<T>[] => {
    const first = waiting.shift()!;
    const group = [first];
    let weight = first.weight;
    for (let i = 0; i < waiting.length && group.length < options.maxItems;) {
      const next = waiting[i]!;
      if (next.key === first.key && weight + next.weight <= maxWeight) {
        group.push(...waiting.splice(i, 1));
        weight += next.weight;
      } else {
        i++;
      }
    }
    return group;
  };

  const turn = async (): Promise<void> => {
    const pause = options.linger?.(waiting.length) ?? 0;
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    // Another turn may have taken every item meanwhile.
    if (waiting.length > 0) await settle(take());
  };

  const pump = () => {
    while (running < limit && waiting.length > 0) {
      running++;
      // A turn never rejects: settle hands every outcome to its item.
      void turn().finally(() => {
        running--;
        pump();
      });
    }
  };

  return (item) =>
    new Promise<void>((resolve, reject) => {
      waiting.push({
        item,
        weight: options.weight?.(item) ?? 0,
        key: options.key?.(item) ?? "",
        resolve,
        reject,
      });
      pump();
    });
}
