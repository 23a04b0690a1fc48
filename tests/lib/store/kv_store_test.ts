import assert from "node:assert/strict";
import {
  LOCKED_ATTEMPTS,
  openKv,
  retryWhileLocked,
  withBusyRetry,
} from "../../../lib/store/kv_store.ts";

const WORKER = `
  import { openKv } from ${
  JSON.stringify(new URL("../../../lib/store/kv_store.ts", import.meta.url).href)
};
  const kv = await openKv(Deno.args[0]);
  let errors = 0;
  await Promise.all(Array.from({ length: 150 }, async (_, i) => {
    try {
      while (true) {
        const entry = await kv.get(["counter"]);
        const next = (entry.value ?? 0) + 1;
        const result = await kv.atomic().check(entry).set(["counter"], next)
          .sum(["sum"], 1n).enqueue({ i }).commit();
        if (result.ok) break;
      }
      await kv.set(["done", Deno.pid, i], true);
    } catch (err) {
      errors++;
      console.error(String(err));
    }
  }));
  console.log(JSON.stringify({ errors }));
  kv.close();
`;

Deno.test("kv store: four processes writing one KV file lose nothing and see no lock errors", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/kv.sqlite3`;
  try {
    const outputs = await Promise.all(
      Array.from({ length: 4 }, () =>
        new Deno.Command(Deno.execPath(), {
          args: ["eval", "--unstable-kv", WORKER, path],
          stdout: "piped",
          stderr: "piped",
        }).output()),
    );
    for (const output of outputs) {
      assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
      assert.deepEqual(JSON.parse(new TextDecoder().decode(output.stdout)), { errors: 0 });
    }
    const kv = await openKv(path);
    try {
      assert.equal((await kv.get<number>(["counter"])).value, 600);
      assert.equal((await kv.get<Deno.KvU64>(["sum"])).value?.value, 600n);
      assert.equal((await Array.fromAsync(kv.list({ prefix: ["done"] }))).length, 600);
    } finally {
      kv.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("kv store: only lock errors are retried, and not forever", async () => {
  let calls = 0;
  const locked = () => {
    calls++;
    return Promise.reject(new TypeError("database is locked"));
  };
  const pauses: number[] = [];
  await assert.rejects(
    retryWhileLocked(locked, (attempt) => {
      pauses.push(attempt);
      return 0;
    }),
    /database is locked/,
  );
  assert.equal(calls, LOCKED_ATTEMPTS);
  assert.deepEqual(pauses, Array.from({ length: LOCKED_ATTEMPTS - 1 }, (_, i) => i + 1));
  calls = 0;
  await assert.rejects(
    retryWhileLocked(() => {
      calls++;
      return Promise.reject(new Error("other"));
    }),
    /other/,
  );
  assert.equal(calls, 1);
  calls = 0;
  assert.equal(
    await retryWhileLocked(() =>
      ++calls < 3 ? Promise.reject(new TypeError("database is locked")) : Promise.resolve("ok")
    ),
    "ok",
  );
  assert.equal(calls, 3);
});

Deno.test("kv store: the wrapper is transparent (atomic chains, versionstamps, list, close)", async () => {
  const kv = withBusyRetry(await Deno.openKv(":memory:"));
  try {
    const first = await kv.atomic().check({ key: ["a"], versionstamp: null }).set(["a"], 1).sum([
      "n",
    ], 2n).commit();
    assert.ok(first.ok);
    const entry = await kv.get<number>(["a"]);
    assert.equal(entry.value, 1);
    assert.equal(entry.versionstamp, (first as Deno.KvCommitResult).versionstamp);
    const stale = await kv.atomic().check({ key: ["a"], versionstamp: null }).set(["a"], 2)
      .commit();
    assert.equal(stale.ok, false);
    assert.deepEqual((await Array.fromAsync(kv.list({ prefix: [] }))).map((e) => e.key), [["a"], [
      "n",
    ]]);
  } finally {
    kv.close();
  }
});
