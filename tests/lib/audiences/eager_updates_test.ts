import assert from "node:assert/strict";
import { createEagerUpdates } from "../../../lib/audiences/eager_updates.ts";

Deno.test("eager updates: a committed run answers its tokens' jobs once; a failed one leaves them to the job", async () => {
  const errors: unknown[] = [];
  const eager = createEagerUpdates((err) => errors.push(err));
  let finish!: () => void;
  eager.start(["t1", "t2"], () => new Promise<void>((resolve) => finish = resolve));
  eager.start(["t3"], () => Promise.reject(new Error("database gone")));
  // A job arriving while its run goes on waits for it.
  const waiting = eager.claim("t1");
  finish();
  assert.equal(await waiting, true);
  assert.equal(await eager.claim("t2"), true);
  // Claimed once: a redelivered message evaluates again.
  assert.equal(await eager.claim("t1"), false);
  assert.equal(await eager.claim("t3"), false);
  assert.deepEqual(errors.map(String), ["Error: database gone"]);
  // A message without a token, or from another process, is this process's to evaluate.
  assert.equal(await eager.claim(undefined), false);
  assert.equal(await eager.claim("elsewhere"), false);
});

Deno.test("eager updates: settled waits for every run started; past the bound the oldest tokens are forgotten", async () => {
  const eager = createEagerUpdates(() => {}, 2);
  const done: string[] = [];
  const run = (name: string, ms: number) => () =>
    new Promise<void>((resolve) => setTimeout(() => resolve(void done.push(name)), ms));
  eager.start(["a"], run("a", 30));
  eager.start(["b"], run("b", 10));
  eager.start(["c"], run("c", 20));
  await eager.settled();
  assert.deepEqual(done.sort(), ["a", "b", "c"]);
  assert.equal(await eager.claim("a"), false, "forgotten: its job evaluates in full");
  assert.equal(await eager.claim("b"), true);
  assert.equal(await eager.claim("c"), true);
  await eager.settled();
});
