import assert from "node:assert/strict";
import {
  createBrandConcurrency,
  heavyReadsPerBrand,
  KeyedSemaphore,
} from "../../../lib/http/brand_concurrency.ts";
import { HttpError } from "../../../lib/http/errors.ts";

Deno.test("KeyedSemaphore: at most `limit` permits per key, each key on its own", () => {
  const semaphore = new KeyedSemaphore(2);
  const a1 = semaphore.tryAcquire("a");
  const a2 = semaphore.tryAcquire("a");
  assert.ok(a1 && a2);
  assert.equal(semaphore.tryAcquire("a"), null);
  assert.equal(semaphore.held("a"), 2);
  // Another key is not affected by a full one.
  const b1 = semaphore.tryAcquire("b");
  assert.ok(b1);
  assert.equal(semaphore.held("b"), 1);
  // A released permit can be taken again; releasing twice gives back one permit only.
  a1();
  a1();
  assert.equal(semaphore.held("a"), 1);
  const a3 = semaphore.tryAcquire("a");
  assert.ok(a3);
  assert.equal(semaphore.tryAcquire("a"), null);
  // Keys without permits leave nothing behind.
  a2();
  a3();
  b1();
  assert.equal(semaphore.size, 0);
  assert.equal(semaphore.held("a"), 0);
  assert.throws(() => new KeyedSemaphore(0));
});

Deno.test("heavyReadsPerBrand: half the pool, at least one", () => {
  assert.equal(heavyReadsPerBrand(10), 5);
  assert.equal(heavyReadsPerBrand(4), 2);
  assert.equal(heavyReadsPerBrand(3), 1);
  assert.equal(heavyReadsPerBrand(1), 1);
});

Deno.test("createBrandConcurrency: past the bound 429 rate_limited with Retry-After", async () => {
  const bound = createBrandConcurrency(4);
  assert.equal(bound.limit, 2);
  const first = bound.acquire("brand_a");
  let inside = 0;
  // run holds a permit while its function runs, and gives it back even when it throws.
  await bound.run("brand_a", async () => {
    inside += 1;
    assert.throws(() => bound.acquire("brand_a"), (err: unknown) => {
      assert.ok(err instanceof HttpError);
      assert.equal(err.status, 429);
      assert.equal(err.code, "rate_limited");
      assert.equal(err.headers["Retry-After"], "1");
      return true;
    });
    // Another brand still gets its own share.
    bound.acquire("brand_b")();
    await Promise.resolve();
  });
  await assert.rejects(bound.run("brand_a", () => Promise.reject(new Error("boom"))), /boom/);
  assert.equal(inside, 1);
  const second = bound.acquire("brand_a");
  assert.throws(() => bound.acquire("brand_a"), HttpError);
  first();
  second();
  bound.acquire("brand_a")();
});

Deno.test("createBrandConcurrency: tryAcquire shares the bound with acquire and refuses with null", () => {
  const bound = createBrandConcurrency(4);
  const first = bound.tryAcquire("brand_a")!;
  const second = bound.acquire("brand_a");
  assert.equal(bound.held("brand_a"), 2);
  assert.equal(bound.tryAcquire("brand_a"), null);
  assert.throws(() => bound.acquire("brand_a"), HttpError);
  assert.ok(bound.tryAcquire("brand_b"));
  first();
  first();
  assert.equal(bound.held("brand_a"), 1);
  second();
  assert.equal(bound.held("brand_a"), 0);
});
