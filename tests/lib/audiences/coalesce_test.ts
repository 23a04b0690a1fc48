import assert from "node:assert/strict";
import { coalesceByScope, type CoalescePolicy } from "../../../lib/audiences/coalesce.ts";

Deno.test("coalesceByScope: calls arriving during a run go together into the next; scopes run apart", async () => {
  const runs: [string, string[]][] = [];
  let release!: () => void;
  const first = new Promise<void>((resolve) => release = resolve);
  const update = coalesceByScope(async (scope, ids) => {
    runs.push([scope, [...ids].sort()]);
    if (runs.length === 1) await first;
  });
  const a1 = update({ scope: "a", profileIds: ["p1"] });
  const a2 = update({ scope: "a", profileIds: ["p2", "p3"] });
  const a3 = update({ scope: "a", profileIds: ["p3", "p4"] });
  const b1 = update({ scope: "b", profileIds: ["q1"] });
  await b1;
  assert.deepEqual(runs, [["a", ["p1"]], ["b", ["q1"]]], "b does not wait for a");
  release();
  await Promise.all([a1, a2, a3]);
  assert.deepEqual(runs, [["a", ["p1"]], ["b", ["q1"]], ["a", ["p2", "p3", "p4"]]]);
});

Deno.test("coalesceByScope: a failed run rejects its own callers only; the next run still happens", async () => {
  let calls = 0;
  let release!: () => void;
  const first = new Promise<void>((resolve) => release = resolve);
  const update = coalesceByScope(async () => {
    calls++;
    if (calls === 1) {
      await first;
      throw new Error("database down");
    }
  });
  const failing = update({ scope: "a", profileIds: ["p1"] });
  const next = update({ scope: "a", profileIds: ["p2"] });
  release();
  await assert.rejects(failing, /database down/);
  await next;
  assert.equal(calls, 2);
});

/** Lets every timer and promise due now run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

/** A coalescer under `policy` whose runs record their ids (sorted) in `runs`. */
function recording(policy: CoalescePolicy) {
  const runs: string[][] = [];
  const update = coalesceByScope((_scope, ids) => {
    runs.push([...ids].sort());
    return Promise.resolve();
  }, policy);
  return { runs, update };
}

Deno.test("coalesceByScope: while a backlog follows, a run waits for company until its batch is full; a call with nothing after it starts one at once", async () => {
  const { runs, update } = recording({ busyPending: 2, batchProfiles: 3, maxWaitMs: 60_000 });
  const first = [
    update({ scope: "a", profileIds: ["p1"], pending: 5 }),
    update({ scope: "a", profileIds: ["p2"], pending: 5 }),
  ];
  await settle();
  assert.deepEqual(runs, [], "two profiles wait for a third");
  first.push(update({ scope: "a", profileIds: ["p2", "p3"], pending: 5 }));
  await Promise.all(first);
  assert.deepEqual(runs, [["p1", "p2", "p3"]]);
  const second = update({ scope: "a", profileIds: ["p4"], pending: 2 });
  await settle();
  assert.equal(runs.length, 1, "p4 waits while two messages follow");
  await Promise.all([second, update({ scope: "a", profileIds: ["p5"], pending: 1 })]);
  assert.deepEqual(runs, [["p1", "p2", "p3"], ["p4", "p5"]]);
  // Without a backlog (the queue's own jobs say nothing of one) a run starts at once.
  await update({ scope: "a", profileIds: ["p6"] });
  assert.deepEqual(runs.at(-1), ["p6"]);
});

Deno.test("coalesceByScope: a run waiting for company starts once its first caller has waited the longest wait", async () => {
  const { runs, update } = recording({ busyPending: 1, batchProfiles: 100, maxWaitMs: 30 });
  await Promise.all([
    update({ scope: "a", profileIds: ["p1"], pending: 9 }),
    update({ scope: "a", profileIds: ["p2"], pending: 9 }),
  ]);
  assert.deepEqual(runs, [["p1", "p2"]]);
});
