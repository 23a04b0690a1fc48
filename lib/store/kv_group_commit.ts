/**
 * Group commit for Deno KV: concurrent callers' writes share KV transactions.
 *
 * @module
 */
import { createBatcher } from "./batcher.ts";

/** A write added to an atomic KV operation. */
export type KvWrite = (op: Deno.AtomicOperation) => void;

/** Commits KV writes of concurrent callers together (see {@linkcode createGroupCommit}). */
export interface GroupCommit {
  /**
   * Commits `write` (mutations only, no checks) in one KV transaction, which it may share with
   * other callers': either all of its mutations land or none does. `bytes` is what its values
   * weigh, roughly, so that a shared transaction stays within KV's limits.
   */
  commit(write: KvWrite, bytes?: number): Promise<void>;
}

/**
 * Group commit over one KV database, on the batching layer of batcher.ts: while a transaction is
 * being committed, the writes that arrive wait, and the next transaction takes them together (at
 * most `maxWrites` of them and about `maxBytes`, under KV's 1,000 mutations and 800 KiB). Each
 * KV transaction costs its database far more than each of its mutations does, so under load this
 * multiplies how many requests one KV database commits a second; an idle one commits a lone
 * write at once. When a shared transaction fails, each of its writes is committed again on its
 * own, so one caller's problem is never its neighbours'. (Safe on the local SQLite KV, where a
 * failed commit wrote nothing; a remote KV whose commit timed out after landing would count its
 * sums twice.)
 */
export function createGroupCommit(
  kv: Deno.Kv,
  options: { maxWrites?: number; maxBytes?: number } = {},
): GroupCommit {
  const add = createBatcher<{ write: KvWrite; bytes: number }>({
    maxItems: options.maxWrites ?? 32,
    maxWeight: options.maxBytes ?? 512 * 1024,
    weight: (one) => one.bytes,
    async commit(group) {
      const op = kv.atomic();
      for (const one of group) one.write(op);
      const result = await op.commit();
      // Only a check can refuse a commit, and writes here carry none.
      if (!result.ok) throw new Error("KV refused the commit");
    },
  });
  return { commit: (write, bytes = 0) => add({ write, bytes }) };
}
