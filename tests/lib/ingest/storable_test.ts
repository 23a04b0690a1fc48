import assert from "node:assert/strict";
import { jsonPath, parseJsonExact, unstorableValues } from "../../../lib/ingest/storable.ts";

Deno.test("jsonPath: identifiers as members, other keys quoted, indexes in brackets", () => {
  assert.equal(jsonPath([]), "$");
  assert.equal(
    jsonPath(["events", 0, "properties", "a b", "$ok"]),
    '$.events[0].properties["a b"].$ok',
  );
});

Deno.test("parseJsonExact: exact numbers stay numbers; inexact ones are reported with their text", () => {
  const value = parseJsonExact('{"a":1.50,"b":15e-1,"c":12345678901234567890,"d":1e400}') as Record<
    string,
    unknown
  >;
  assert.equal(value.a, 1.5);
  assert.equal(value.b, 1.5);
  assert.deepEqual(
    unstorableValues(value, ["events", 0]).map((p) => p.path),
    ["$.events[0].c", "$.events[0].d"],
  );
  const [inexact, huge] = unstorableValues(value, []);
  assert.match(inexact!.message, /12345678901234567890 cannot be stored exactly/);
  assert.match(huge!.message, /1e400 is out of range/);
});

Deno.test("unstorableValues: NULs and unpaired surrogates in strings and keys, at most 20", () => {
  const found = unstorableValues({ "k\0": "ok", list: ["fine", "\uD800"], nested: { s: "a\0" } }, [
    "p",
  ]);
  assert.deepEqual(found.map((p) => p.path), ['$.p["k\\u0000"]', "$.p.list[1]", "$.p.nested.s"]);
  assert.match(found[0]!.message, /^key contains NUL/);
  assert.match(found[1]!.message, /unpaired UTF-16 surrogate/);
  assert.equal(unstorableValues(Array.from({ length: 50 }, () => "\0"), []).length, 20);
  assert.deepEqual(unstorableValues({ a: "plain", b: 1, c: null }, []), []);
});
