/** Progress of a long input: objects counted as the bytes pass, reported at most so often. */
import assert from "node:assert/strict";
import { withProgress } from "../../../lib/admin/progress.ts";

function chunks(...parts: string[]): ReadableStream<Uint8Array> {
  return ReadableStream.from(parts.map((part) => new TextEncoder().encode(part)));
}

Deno.test("progress: counts non-blank lines across chunks, passes the bytes on unchanged", async () => {
  let clock = 0;
  const written: string[] = [];
  const input = ['{"a":1}\n{"b"', ":2}\n\n  \n", '{"c":3}'];
  const stream = withProgress(chunks(...input), {
    write: (text) => written.push(text),
    terminal: false,
    now: () => clock,
    everyMs: 1000,
  });
  const reader = stream.getReader();
  const seen: string[] = [];
  for (let i = 0; i < input.length; i++) {
    clock += 700;
    const { value } = await reader.read();
    seen.push(new TextDecoder().decode(value));
  }
  assert.equal((await reader.read()).done, true);
  assert.deepEqual(seen, input);
  // A report at 1400 ms (the second chunk), none at 2100 (within a second of it), then the last.
  assert.deepEqual(written, [
    "2 objects read (1/s, 0.0 MB)\n",
    "3 objects read (1/s, 0.0 MB), done\n",
  ]);
});

Deno.test("progress: a terminal gets one line rewritten in place, ended by the last report", async () => {
  let clock = 0;
  const written: string[] = [];
  const stream = withProgress(chunks("1\n", "2\n"), {
    write: (text) => written.push(text),
    terminal: true,
    now: () => (clock += 1000),
  });
  await new Response(stream).arrayBuffer();
  assert.ok(written.length >= 2);
  assert.ok(written.every((text) => text.startsWith("\r") && text.includes("\x1b[K")));
  const last = written.at(-1)!;
  assert.ok(last.startsWith("\r2 objects read (") && last.endsWith(", done\x1b[K\n"), last);
});
