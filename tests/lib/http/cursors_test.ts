import assert from "node:assert/strict";
import {
  type CursorBinding,
  type CursorDeps,
  keysetStart,
  mintCursor,
  nextKeysetCursor,
  readCursor,
} from "../../../lib/http/cursors.ts";
import { HttpError } from "../../../lib/http/errors.ts";
import { cursorKey } from "../../../lib/store/kv_keys.ts";
import { type TestClock, testClock } from "../../test_support.ts";

const TTL_MS = 3_600_000;
const BINDING: CursorBinding = {
  brandId: "brand_a",
  route: "/cdp/profiles/:id/events",
  resource: "profile-1",
};

async function withCursors(fn: (deps: CursorDeps, clock: TestClock) => Promise<void>) {
  const kv = await Deno.openKv(":memory:");
  const clock = testClock();
  try {
    await fn({ kv, now: clock.now, ttlMs: TTL_MS }, clock);
  } finally {
    kv.close();
  }
}

async function assertHttpError(
  promise: Promise<unknown>,
  status: number,
  code: string,
  label = "",
): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof HttpError, `${label}: not an HttpError: ${err}`);
    assert.equal(err.status, status, label);
    assert.equal(err.code, code, label);
    assert.ok(err.message.length > 0, label);
    return true;
  });
}

Deno.test("cursors: mint then read returns the JSON position", async () => {
  await withCursors(async (deps) => {
    const position = { after: ["2026-11-21T12:00:00.000Z", "evt_01"], n: 3, done: false, x: null };
    const token = await mintCursor(deps, BINDING, position);
    assert.match(token, /^c1_[A-Za-z0-9_-]{22}$/);
    assert.deepEqual(await readCursor(deps, token, BINDING), position);
    // A second token for the same position is a different token.
    const other = await mintCursor(deps, BINDING, position);
    assert.notEqual(other, token);
    assert.deepEqual(await readCursor(deps, other, { ...BINDING }), position);
  });
});

Deno.test("cursors: the stored entry carries the binding and the expiry", async () => {
  await withCursors(async (deps, clock) => {
    const token = await mintCursor(deps, { ...BINDING, resource: "" }, 42);
    const stored = (await deps.kv.get(cursorKey(token))).value;
    assert.deepEqual(stored, {
      brandId: "brand_a",
      route: BINDING.route,
      resource: "",
      position: 42,
      expiresAt: clock.now().getTime() + TTL_MS,
    });
    assert.equal(await readCursor(deps, token, { ...BINDING, resource: "" }), 42);
  });
});

Deno.test("cursors: malformed tokens → 400 bad_request", async () => {
  await withCursors(async (deps) => {
    const token = await mintCursor(deps, BINDING, 1);
    const malformed = [
      "",
      "abc",
      "c1_",
      "c1_short",
      `${token}x`,
      token.slice(0, -1),
      `c2_${token.slice(3)}`,
      `C1_${token.slice(3)}`,
      `c1_${"A".repeat(21)}=`,
      `c1_${"A".repeat(21)}.`,
      ` ${token}`,
    ];
    for (const candidate of malformed) {
      await assertHttpError(readCursor(deps, candidate, BINDING), 400, "bad_request", candidate);
    }
  });
});

Deno.test("cursors: a well-formed but unknown token → 400 bad_request", async () => {
  await withCursors(async (deps) => {
    await assertHttpError(readCursor(deps, `c1_${"A".repeat(22)}`, BINDING), 400, "bad_request");
  });
});

Deno.test("cursors: expired once the clock reaches the ttl → 400 bad_request", async () => {
  await withCursors(async (deps, clock) => {
    const token = await mintCursor(deps, BINDING, "pos");
    clock.advance(TTL_MS - 1);
    assert.equal(await readCursor(deps, token, BINDING), "pos");
    clock.advance(1);
    await assertHttpError(readCursor(deps, token, BINDING), 400, "bad_request");
  });
});

Deno.test("cursors: another brand → 403 forbidden; another route or resource → 400", async () => {
  await withCursors(async (deps) => {
    const token = await mintCursor(deps, BINDING, "pos");
    await assertHttpError(
      readCursor(deps, token, { ...BINDING, brandId: "brand_b" }),
      403,
      "forbidden",
      "brand",
    );
    // The brand check comes first: another brand never learns what else the cursor is bound to.
    await assertHttpError(
      readCursor(deps, token, { brandId: "brand_b", route: "/cdp/profiles", resource: "" }),
      403,
      "forbidden",
      "brand and route",
    );
    await assertHttpError(
      readCursor(deps, token, { ...BINDING, route: "/cdp/profiles" }),
      400,
      "bad_request",
      "route",
    );
    await assertHttpError(
      readCursor(deps, token, { ...BINDING, resource: "profile-2" }),
      400,
      "bad_request",
      "resource",
    );
    await assertHttpError(
      readCursor(deps, token, { ...BINDING, resource: "" }),
      400,
      "bad_request",
      "empty resource",
    );
    // None of the refused reads consumed the cursor.
    assert.equal(await readCursor(deps, token, BINDING), "pos");
  });
});

Deno.test("keysetStart and nextKeysetCursor: offset pages within the window, cursor pages beyond", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const clock = testClock();
    const deps = { kv, now: clock.now, ttlMs: 60_000 };
    const binding = { brandId: "b1", route: "/cdp/profiles", resource: "" };
    assert.deepEqual(await keysetStart(deps, { limit: 25, offset: 50 }, binding), { offset: 50 });
    await assert.rejects(keysetStart(deps, { limit: 25, offset: 9_990 }, binding), HttpError);
    const cursor = await nextKeysetCursor(deps, binding, {
      more: true,
      lastId: "p75",
      offset: 50,
      count: 25,
    });
    assert.ok(cursor);
    assert.deepEqual(
      await keysetStart(deps, { cursor: cursor!, limit: 25, offset: 9_999_999 }, binding),
      { after: "p75", offset: 75 },
    );
    await assert.rejects(
      keysetStart(deps, { cursor: cursor!, limit: 25, offset: 0 }, binding, false),
      HttpError,
    );
    assert.equal(
      await nextKeysetCursor(deps, binding, { more: false, lastId: "p", offset: 0, count: 1 }),
      null,
    );
    assert.equal(
      await nextKeysetCursor(
        deps,
        binding,
        { more: true, lastId: "p", offset: 0, count: 1 },
        false,
      ),
      null,
    );
  } finally {
    kv.close();
  }
});
