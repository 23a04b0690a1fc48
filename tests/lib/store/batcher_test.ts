import assert from "node:assert/strict";
import { type BatcherOptions, createBatcher } from "../../../lib/store/batcher.ts";

/** A batcher whose commits are recorded, and fail for any group holding an item in `failing`. */
function recorded<T>(options: Partial<BatcherOptions<T>> & { failing?: Set<T> } = {}) {
  const commits: T[][] = [];
  let running = 0;
  let peak = 0;
  const add = createBatcher<T>({
    maxItems: 100,
    ...options,
    async commit(items) {
      commits.push(items);
      running++;
      peak = Math.max(peak, running);
      await new Promise((resolve) => setTimeout(resolve, 1));
      running--;
      if (items.some((item) => options.failing?.has(item))) throw new Error(`fails: ${items}`);
    },
  });
  return { add, commits, peak: () => peak };
}

Deno.test("batcher: a lone item commits at once; the items that arrive meanwhile share the next group", async () => {
  const { add, commits } = recorded<number>();
  await Promise.all([1, 2, 3, 4].map((n) => add(n)));
  assert.deepEqual(commits, [[1], [2, 3, 4]]);
  await add(5);
  assert.deepEqual(commits.at(-1), [5]);
});

Deno.test("batcher: a group holds one key, at most maxItems, within maxWeight (its first item aside)", async () => {
  const { add, commits } = recorded<string>({
    maxItems: 3,
    maxWeight: 10,
    key: (item) => item[0]!,
    weight: (item) => Number(item.slice(1)),
  });
  await Promise.all(["a1", "a2", "b1", "a3", "a4", "a5", "b20", "b2", "a6"].map((i) => add(i)));
  assert.deepEqual(commits, [["a1"], ["a2", "a3", "a4"], ["b1", "b2"], ["a5"], ["b20"], ["a6"]]);
});

Deno.test("batcher: at most `concurrency` groups commit at once", async () => {
  const { add, commits, peak } = recorded<number>({ maxItems: 2, concurrency: 3 });
  await Promise.all(Array.from({ length: 20 }, (_, i) => add(i)));
  assert.equal(peak(), 3);
  assert.deepEqual(commits.flat().sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i));
});

Deno.test("batcher: a failed group comes back item by item through the same commit; only the faulty item fails", async () => {
  const { add, commits } = recorded<number>({ failing: new Set([3]) });
  const outcomes = await Promise.allSettled([1, 2, 3, 4].map((n) => add(n)));
  assert.deepEqual(outcomes.map((o) => o.status), [
    "fulfilled",
    "fulfilled",
    "rejected",
    "fulfilled",
  ]);
  assert.match(String((outcomes[2] as PromiseRejectedResult).reason), /fails: 3/);
  assert.deepEqual(commits, [[1], [2, 3, 4], [2], [3], [4]]);
  // The batcher keeps working after a failure.
  await add(5);
  assert.deepEqual(commits.at(-1), [5]);
});

Deno.test("batcher: a failure that `isolates` says is nobody's own fails the whole group at once", async () => {
  const { add, commits } = recorded<number>({ failing: new Set([3]), isolates: () => false });
  const outcomes = await Promise.allSettled([1, 2, 3, 4].map((n) => add(n)));
  assert.deepEqual(outcomes.map((o) => o.status), [
    "fulfilled",
    "rejected",
    "rejected",
    "rejected",
  ]);
  assert.deepEqual(commits, [[1], [2, 3, 4]]);
});

Deno.test("batcher: `linger` holds a group back for company, with the count of items waiting", async () => {
  const asked: number[] = [];
  const { add, commits } = recorded<number>({
    linger(waiting) {
      asked.push(waiting);
      return waiting < 3 ? 5 : 0;
    },
  });
  await Promise.all([1, 2, 3].map((n) => add(n)));
  assert.deepEqual(commits, [[1, 2, 3]]);
  assert.deepEqual(asked, [1]);
});
