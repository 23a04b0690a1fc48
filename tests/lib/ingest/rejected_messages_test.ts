import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  EXCERPT_CHARS,
  listRejectedMessages,
  MAX_KEPT_PER_REQUEST,
  recordRejectedMessages,
  rejectedCount,
} from "../../../lib/ingest/rejected_messages.ts";
import { withKv } from "../../test_support.ts";

const newId = monotonicFactory();
const request = (brandId: string) => ({
  brandId,
  door: "POST /v1/batch",
  at: new Date("2026-11-21T12:00:00Z"),
  newId: () => newId(),
});

Deno.test("rejected messages: counted per brand, kept with their reasons, newest first", async () => {
  await withKv(async (kv) => {
    const messages = [
      { type: "track", userId: "ok" },
      { type: "track", userId: "bad:id", writeKey: "svc_secret" },
      { type: "track", userId: "u", properties: { x: "y".repeat(5_000) } },
    ];
    await recordRejectedMessages(kv, request("A"), [
      { index: 1, errors: [{ path: "$.batch[1].userId", message: "must not contain ':'" }] },
      { index: 2, errors: [{ path: "$.batch[2]", message: "message exceeds 32768 bytes" }] },
    ], messages);
    await recordRejectedMessages(kv, request("B"), [
      { index: 0, errors: [{ path: "$.userId", message: "userId or anonymousId required" }] },
    ], [{}]);
    // Nothing refused: nothing written.
    await recordRejectedMessages(kv, request("A"), [], messages);

    assert.equal(await rejectedCount(kv, "A"), 2);
    assert.equal(await rejectedCount(kv, "B"), 1);
    assert.equal(await rejectedCount(kv, "C"), 0);
    const kept = await listRejectedMessages(kv, "A", 10);
    assert.deepEqual(kept.map((m) => [m.index, m.door, m.at, m.errors[0]!.message]), [
      [2, "POST /v1/batch", "2026-11-21T12:00:00.000Z", "message exceeds 32768 bytes"],
      [1, "POST /v1/batch", "2026-11-21T12:00:00.000Z", "must not contain ':'"],
    ]);
    // The excerpt is the message as sent, bounded, and never holds the API key.
    assert.equal(kept[1]!.excerpt, JSON.stringify({ type: "track", userId: "bad:id" }));
    assert.equal(kept[0]!.excerpt.length, EXCERPT_CHARS);
    assert.ok(kept[0]!.excerpt.endsWith("…"));
    assert.deepEqual((await listRejectedMessages(kv, "A", 1)).map((m) => m.index), [2]);
  });
});

Deno.test("rejected messages: past the per-request bound the rest are counted only; the largest request commits", async () => {
  await withKv(async (kv) => {
    // The largest a batch can make them: 2,000 messages of 32 KB of 4-byte characters, each with
    // many long reasons; still one commit within KV's bounds.
    const n = 2_000;
    const rejected = Array.from({ length: n }, (_, index) => ({
      index,
      errors: Array.from({ length: 20 }, (_, e) => ({
        path: `$.batch[${index}].${"p".repeat(1_000)}${e}`,
        message: "😀".repeat(1_000),
      })),
    }));
    const message = { text: "😀".repeat(8_000) };
    await recordRejectedMessages(kv, request("A"), rejected, rejected.map(() => message));
    assert.equal(await rejectedCount(kv, "A"), n);
    assert.equal((await listRejectedMessages(kv, "A", 1000)).length, MAX_KEPT_PER_REQUEST);
  });
});
