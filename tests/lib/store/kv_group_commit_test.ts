import assert from "node:assert/strict";
import { createGroupCommit } from "../../../lib/store/kv_group_commit.ts";

async function withKv(fn: (kv: Deno.Kv) => Promise<void>) {
  const kv = await Deno.openKv(":memory:");
  try {
    await fn(kv);
  } finally {
    kv.close();
  }
}

/** The versionstamp each key was written at: writes sharing a transaction share one. */
async function stamps(kv: Deno.Kv, count: number): Promise<string[]> {
  const entries = await Array.fromAsync(kv.list<number>({ prefix: ["k"] }));
  assert.deepEqual(entries.map((entry) => entry.value), Array.from({ length: count }, (_, i) => i));
  return entries.map((entry) => entry.versionstamp);
}

Deno.test("group commit: a lone write commits at once, in its own transaction", async () => {
  await withKv(async (kv) => {
    const group = createGroupCommit(kv);
    for (let i = 0; i < 3; i++) await group.commit((op) => op.set(["k", i], i));
    assert.equal(new Set(await stamps(kv, 3)).size, 3);
  });
});

Deno.test("group commit: writes arriving during a commit share the next transaction", async () => {
  await withKv(async (kv) => {
    const group = createGroupCommit(kv);
    await Promise.all(
      Array.from(
        { length: 20 },
        (_, i) => group.commit((op) => op.set(["k", i], i).sum(["n"], 1n)),
      ),
    );
    // The first goes alone; the 19 that queued behind it go together.
    const seen = await stamps(kv, 20);
    assert.equal(new Set(seen).size, 2);
    assert.equal(new Set(seen.slice(1)).size, 1);
    assert.equal((await kv.get<Deno.KvU64>(["n"])).value?.value, 20n);
  });
});

Deno.test("group commit: a transaction takes at most maxWrites writes and about maxBytes", async () => {
  await withKv(async (kv) => {
    const byCount = createGroupCommit(kv, { maxWrites: 5 });
    await Promise.all(
      Array.from({ length: 12 }, (_, i) => byCount.commit((op) => op.set(["k", i], i))),
    );
    const counts = new Map<string, number>();
    for (const stamp of await stamps(kv, 12)) counts.set(stamp, (counts.get(stamp) ?? 0) + 1);
    assert.deepEqual([...counts.values()], [1, 5, 5, 1]);
  });
  await withKv(async (kv) => {
    const byBytes = createGroupCommit(kv, { maxBytes: 1000 });
    await Promise.all(
      Array.from({ length: 7 }, (_, i) => byBytes.commit((op) => op.set(["k", i], i), 300)),
    );
    const counts = new Map<string, number>();
    for (const stamp of await stamps(kv, 7)) counts.set(stamp, (counts.get(stamp) ?? 0) + 1);
    assert.deepEqual([...counts.values()], [1, 3, 3]);
  });
});

Deno.test("group commit: a write KV refuses fails alone; its neighbours land", async () => {
  await withKv(async (kv) => {
    const group = createGroupCommit(kv);
    const tooLarge = "x".repeat(70_000); // over KV's 64 KiB per value
    const results = await Promise.allSettled([
      group.commit((op) => op.set(["k", 0], 0)),
      group.commit((op) => op.set(["k", 1], 1)),
      group.commit((op) => op.set(["too large"], tooLarge)),
      group.commit((op) => op.set(["k", 2], 2)),
      group.commit(() => {
        throw new Error("a write that cannot even be built");
      }),
      group.commit((op) => op.set(["k", 3], 3)),
    ]);
    assert.deepEqual(results.map((r) => r.status), [
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
      "rejected",
      "fulfilled",
    ]);
    assert.equal((await stamps(kv, 4)).length, 4);
    assert.equal((await kv.get(["too large"])).versionstamp, null);
    // A lone failing write is rejected too, and the committer keeps working.
    await assert.rejects(group.commit((op) => op.set(["too large"], tooLarge)));
    await group.commit((op) => op.set(["after"], true));
    assert.equal((await kv.get(["after"])).value, true);
  });
});
