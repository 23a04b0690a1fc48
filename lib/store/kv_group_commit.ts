/**
 * Group commit for Deno KV: concurrent callers' writes share KV transactions.
 *
 * @module
 */

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

interface _Waiting {
  write: KvWrite;
  bytes: number;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit over one KV database: while a transaction is being committed, the writes that
 * arrive wait, and the next transaction takes them together (at most `maxWrites` of them and
 * about `maxBytes`, under KV's 1,000 mutations and 800 KiB). Each KV transaction costs its
 * database far more than each of its mutations does, so under load this multiplies how many
 * requests one KV database commits a second; an idle one commits a lone write at once. When a
 * shared transaction fails, each of its writes is committed again on its own, so one caller's
 * problem is never its neighbours'.
 */
export function createGroupCommit(
  kv: Deno.Kv,
  options: { maxWrites?: number; maxBytes?: number } = {},
): GroupCommit {
  const maxWrites = options.maxWrites ?? 32;
  const maxBytes = options.maxBytes ?? 512 * 1024;
  const waiting: _Waiting[] = [];
  let committing = false;

  async function drain(): Promise<void> {
    committing = true;
    while (waiting.length > 0) {
      let count = 0;
      let bytes = 0;
      while (
        count < waiting.length && count < maxWrites &&
        (count === 0 || bytes + waiting[count]!.bytes <= maxBytes)
      ) bytes += waiting[count++]!.bytes;
      const group = waiting.splice(0, count);
      try {
        await _commit(kv, group);
        for (const one of group) one.resolve();
      } catch (err) {
        if (group.length === 1) {
          group[0]!.reject(err);
          continue;
        }
        // Safe on the local SQLite KV, where a failed commit wrote nothing; a remote KV whose
        // commit timed out after landing would count its sums twice.
        for (const one of group) {
          await _commit(kv, [one]).then(one.resolve, one.reject);
        }
      }
    }
    committing = false;
  }

  return {
    commit(write, bytes = 0) {
      return new Promise<void>((resolve, reject) => {
        waiting.push({ write, bytes, resolve, reject });
        if (!committing) void drain(); // it settles every waiting promise and never rejects
      });
    },
  };
}

async function _commit(kv: Deno.Kv, group: _Waiting[]): Promise<void> {
  const op = kv.atomic();
  for (const one of group) one.write(op);
  const result = await op.commit();
  // Only a check can refuse a commit, and writes here carry none.
  if (!result.ok) throw new Error("KV refused the commit");
}
