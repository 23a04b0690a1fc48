import assert from "node:assert/strict";
import { decodeTime } from "ulid";
import { ulidSource, uuidV7 } from "../../lib/ids.ts";

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** Runs `fn` with Date.now and crypto.getRandomValues replaced, restoring both after. */
function withStubs(now: () => number, fill: number | null, fn: () => void) {
  const realNow = Date.now;
  const realRandom = crypto.getRandomValues;
  Date.now = now;
  if (fill !== null) {
    crypto.getRandomValues = (<T extends ArrayBufferView | null>(array: T): T => {
      (array as unknown as Uint8Array).fill(fill);
      return array;
    }) as typeof crypto.getRandomValues;
  }
  try {
    fn();
  } finally {
    Date.now = realNow;
    crypto.getRandomValues = realRandom;
  }
}

Deno.test("ulidSource: ULIDs of the current time, strictly increasing, unique", () => {
  const newId = ulidSource();
  const before = Date.now();
  const ids = Array.from({ length: 20_000 }, () => newId());
  const after = Date.now();
  for (const id of ids) assert.match(id, ULID);
  for (let i = 1; i < ids.length; i++) {
    assert.ok(ids[i - 1]! < ids[i]!, `${ids[i - 1]} < ${ids[i]}`);
  }
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(decodeTime(ids[0]!) >= before && decodeTime(ids.at(-1)!) <= after);
});

Deno.test("ulidSource: within a millisecond, and when the clock goes back, the random part counts up", () => {
  let time = 1_767_322_800_000;
  withStubs(() => time, 30, () => {
    const newId = ulidSource();
    const first = newId();
    assert.equal(decodeTime(first), time);
    assert.equal(first.slice(10), "Y".repeat(16));
    assert.equal(newId().slice(10), "Y".repeat(15) + "Z");
    // Z is the last digit: it carries.
    time -= 5;
    const carried = newId();
    assert.equal(carried, first.slice(0, 10) + "Y".repeat(14) + "Z0");
    time += 10;
    const later = newId();
    assert.equal(decodeTime(later), time);
    assert.ok(later > carried);
  });
});

Deno.test("ulidSource: each new millisecond draws a fresh random part", () => {
  let time = 1_000;
  const newId = ulidSource();
  withStubs(() => time, null, () => {
    const randoms = new Set<string>();
    for (let i = 0; i < 1_000; i++) {
      time++;
      randoms.add(newId().slice(10));
    }
    assert.equal(randoms.size, 1_000);
  });
});

Deno.test("ulidSource: a full random part within one millisecond throws instead of wrapping", () => {
  withStubs(() => 5_000, 31, () => {
    const newId = ulidSource();
    assert.equal(newId().slice(10), "Z".repeat(16));
    assert.throws(() => newId(), /overflowed/);
  });
});

Deno.test("uuidV7: a version 7 UUID led by the time, so later ids sort after earlier ones", () => {
  const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const at = Date.UTC(2026, 10, 21, 12, 34, 56, 789);
  const id = uuidV7(at);
  assert.match(id, UUID_V7);
  // The first 48 bits are the milliseconds since the epoch.
  assert.equal(parseInt(id.replaceAll("-", "").slice(0, 12), 16), at);
  const ids = Array.from({ length: 1000 }, (_, i) => uuidV7(at + i));
  assert.deepEqual([...ids].sort(), ids);
  assert.equal(new Set(Array.from({ length: 10_000 }, () => uuidV7(at))).size, 10_000);
  assert.match(uuidV7(), UUID_V7);
});
