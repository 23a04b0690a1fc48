import assert from "node:assert/strict";
import { coalesceByScope } from "../../../lib/audiences/coalesce.ts";

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
