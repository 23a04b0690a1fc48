import assert from "node:assert/strict";
import {
  applyUpdateProperties,
  checkUpdateProperties,
  type UpdatePropertiesPayload,
} from "../../../lib/engine/update_properties.ts";

/** Freezes a value and everything reachable from it, so that any write throws (modules are strict). */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** Checks the payload (it must be valid), then applies it to a frozen copy of `current`. */
function apply(current: Record<string, unknown>, payload: UpdatePropertiesPayload) {
  assert.equal(checkUpdateProperties(payload), null);
  return applyUpdateProperties(deepFreeze(structuredClone(current)), deepFreeze(payload));
}

// --- update ---

Deno.test("updateProperties: update sets new keys and overwrites existing ones", () => {
  const out = apply({ email: "old@example.com", city: "Paris" }, {
    update: { "properties.email": "new@example.com", "properties.firstName": "Ann" },
  });
  assert.deepEqual(out, {
    properties: { email: "new@example.com", city: "Paris", firstName: "Ann" },
    changed: true,
  });
});

Deno.test("updateProperties: update overwrites with any JSON value, including falsy ones", () => {
  const out = apply({ a: "x", b: "x", c: "x", d: "x", e: "x" }, {
    update: {
      "properties.a": 0,
      "properties.b": "",
      "properties.c": false,
      "properties.d": [1, 2],
      "properties.e": { nested: true },
    },
  });
  assert.deepEqual(out.properties, { a: 0, b: "", c: false, d: [1, 2], e: { nested: true } });
  assert.equal(out.changed, true);
});

Deno.test("updateProperties: update with null removes the key", () => {
  const out = apply({ email: "a@example.com", city: "Paris" }, {
    update: { "properties.email": null },
  });
  assert.deepEqual(out, { properties: { city: "Paris" }, changed: true });
  assert.equal(Object.hasOwn(out.properties, "email"), false);
});

Deno.test("updateProperties: update with null on a nested key removes only that key", () => {
  const out = apply({ address: { city: "Paris", zip: "75001" } }, {
    update: { "properties.address.zip": null },
  });
  assert.deepEqual(out, { properties: { address: { city: "Paris" } }, changed: true });
});

Deno.test("updateProperties: update with null on a missing path changes nothing and creates nothing", () => {
  for (const key of ["properties.missing", "properties.a.b.c", "properties.n.x"]) {
    const out = apply({ n: 5 }, { update: { [key]: null } });
    assert.deepEqual(out, { properties: { n: 5 }, changed: false }, key);
  }
});

// --- add ---

Deno.test("updateProperties: add sets a key that is absent", () => {
  const out = apply({ email: "a@example.com" }, { add: { "properties.city": "Paris" } });
  assert.deepEqual(out, { properties: { email: "a@example.com", city: "Paris" }, changed: true });
});

Deno.test("updateProperties: add never overwrites an existing value, even a falsy one", () => {
  const current = { city: "Paris", zero: 0, empty: "", no: false, list: [], obj: {} };
  const out = apply(current, {
    add: {
      "properties.city": "Lyon",
      "properties.zero": 1,
      "properties.empty": "filled",
      "properties.no": true,
      "properties.list": [1],
      "properties.obj": { x: 1 },
    },
  });
  assert.deepEqual(out, { properties: current, changed: false });
});

Deno.test("updateProperties: add never overwrites an existing nested value", () => {
  const out = apply({ address: { city: "Paris" } }, {
    add: { "properties.address.city": "Lyon", "properties.address.zip": "75001" },
  });
  assert.deepEqual(out, {
    properties: { address: { city: "Paris", zip: "75001" } },
    changed: true,
  });
});

Deno.test("updateProperties: add with null does nothing", () => {
  const out = apply({ email: "a@example.com" }, {
    add: { "properties.city": null, "properties.email": null, "properties.a.b": null },
  });
  assert.deepEqual(out, { properties: { email: "a@example.com" }, changed: false });
  assert.equal(Object.hasOwn(out.properties, "city"), false);
  assert.equal(Object.hasOwn(out.properties, "a"), false);
});

Deno.test("updateProperties: add of a nested key creates the intermediate objects", () => {
  const out = apply({}, { add: { "properties.a.b.c": "v" } });
  assert.deepEqual(out, { properties: { a: { b: { c: "v" } } }, changed: true });
});

// --- delete ---

Deno.test("updateProperties: delete removes keys, top-level and nested", () => {
  const out = apply({ email: "a@example.com", address: { city: "Paris", zip: "75001" }, k: 1 }, {
    delete: { "properties.email": true, "properties.address.zip": true },
  });
  assert.deepEqual(out, { properties: { address: { city: "Paris" }, k: 1 }, changed: true });
});

Deno.test("updateProperties: delete tolerates missing paths and creates nothing", () => {
  const current = { n: 5, s: "text", list: [1, 2], obj: { x: 1 } };
  const out = apply(current, {
    delete: {
      "properties.missing": true,
      "properties.a.b.c": true,
      "properties.n.x": true,
      "properties.s.length": true,
      "properties.list.0": true,
      "properties.obj.y": true,
      "properties.obj.y.z": true,
    },
  });
  assert.deepEqual(out, { properties: current, changed: false });
});

// --- nested paths ---

Deno.test("updateProperties: nested update creates intermediates and keeps siblings", () => {
  assert.deepEqual(apply({}, { update: { "properties.a.b.c": 1 } }), {
    properties: { a: { b: { c: 1 } } },
    changed: true,
  });
  assert.deepEqual(apply({ a: { x: 1, b: { y: 2 } } }, { update: { "properties.a.b.c": 1 } }), {
    properties: { a: { x: 1, b: { y: 2, c: 1 } } },
    changed: true,
  });
});

Deno.test("updateProperties: nested update replaces non-object intermediates", () => {
  for (const intermediate of [5, "text", true, null, [1, 2], ["a"]]) {
    const out = apply({ a: intermediate, keep: 1 }, { update: { "properties.a.b": "v" } });
    assert.deepEqual(
      out,
      { properties: { a: { b: "v" }, keep: 1 }, changed: true },
      JSON.stringify(intermediate),
    );
  }
});

Deno.test("updateProperties: five levels of nesting are accepted and applied", () => {
  const payload = { update: { "properties.a.b.c.d.e": 1 } };
  assert.equal(checkUpdateProperties(payload), null);
  assert.deepEqual(apply({}, payload).properties, { a: { b: { c: { d: { e: 1 } } } } });
});

// --- order ---

Deno.test("updateProperties: sections apply in the order update, add, delete", () => {
  // update then add: add sees the updated value and does not overwrite it.
  assert.deepEqual(
    apply({}, { update: { "properties.x": 1 }, add: { "properties.x": 2 } }).properties,
    { x: 1 },
  );
  // update null then add: the key is absent by the time add runs.
  assert.deepEqual(
    apply({ x: 1 }, { update: { "properties.x": null }, add: { "properties.x": 2 } }).properties,
    { x: 2 },
  );
  // add then delete: delete wins.
  assert.deepEqual(
    apply({}, { add: { "properties.y": 1 }, delete: { "properties.y": true } }),
    { properties: {}, changed: false },
  );
  // update then delete: delete wins.
  assert.deepEqual(
    apply({ z: 0 }, { update: { "properties.z": 5 }, delete: { "properties.z": true } }),
    { properties: {}, changed: true },
  );
  // All three on one key, declared in reverse order in the object: the sections' order rules.
  assert.deepEqual(
    apply({ w: "old" }, {
      delete: { "properties.w": true },
      add: { "properties.w": "added" },
      update: { "properties.w": "updated" },
    }).properties,
    {},
  );
});

// --- changed ---

Deno.test("updateProperties: changed is false when nothing changes", () => {
  const current = { email: "a@example.com", n: 0, address: { city: "Paris", zip: "75001" } };
  const noops: UpdatePropertiesPayload[] = [
    {},
    { update: {}, add: {}, delete: {} },
    { targetId: "p1", targetType: "profile" },
    { update: { "properties.email": "a@example.com" } },
    { update: { "properties.n": 0 } },
    { update: { "properties.address.city": "Paris" } },
    { update: { "properties.address": { city: "Paris", zip: "75001" } } },
    { update: { "properties.missing": null } },
    { add: { "properties.email": "b@example.com" } },
    { add: { "properties.other": null } },
    { delete: { "properties.missing": true } },
    { delete: { "properties.address.missing": true } },
  ];
  for (const payload of noops) {
    const out = apply(current, payload);
    assert.equal(out.changed, false, JSON.stringify(payload));
    assert.deepEqual(out.properties, current, JSON.stringify(payload));
  }
});

Deno.test("updateProperties: changed is true for each kind of real change", () => {
  const current = { email: "a@example.com", address: { city: "Paris" } };
  const changes: UpdatePropertiesPayload[] = [
    { update: { "properties.email": "b@example.com" } },
    { update: { "properties.email": null } },
    { update: { "properties.address.city": "Lyon" } },
    { update: { "properties.email": 1 } },
    { add: { "properties.city": "Paris" } },
    { delete: { "properties.email": true } },
    { delete: { "properties.address.city": true } },
  ];
  for (const payload of changes) {
    assert.equal(apply(current, payload).changed, true, JSON.stringify(payload));
  }
});

// --- immutability ---

Deno.test("updateProperties: the input properties and payload are never mutated", () => {
  const current = {
    email: "a@example.com",
    address: { city: "Paris", geo: { lat: 1, lon: 2 } },
    tags: ["a", "b"],
  };
  const payload: UpdatePropertiesPayload = {
    update: { "properties.email": "b@example.com", "properties.address.geo.lat": 3 },
    add: { "properties.address.zip": "75001", "properties.nested.new": { k: [1] } },
    delete: { "properties.tags": true, "properties.address.city": true },
  };
  const currentBefore = structuredClone(current);
  const payloadBefore = structuredClone(payload);
  // Frozen: any write to the input throws a TypeError in strict mode.
  const out = applyUpdateProperties(deepFreeze(current), deepFreeze(payload));
  assert.deepEqual(current, currentBefore);
  assert.deepEqual(payload, payloadBefore);
  assert.deepEqual(out, {
    properties: {
      email: "b@example.com",
      address: { geo: { lat: 3, lon: 2 }, zip: "75001" },
      nested: { new: { k: [1] } },
    },
    changed: true,
  });
  assert.notEqual(out.properties, current);
});

Deno.test("updateProperties: the result shares no objects with the input", () => {
  const current = { address: { city: "Paris" }, tags: ["a"] };
  const out = applyUpdateProperties(current, {});
  assert.equal(out.changed, false);
  (out.properties.address as Record<string, unknown>).city = "Lyon";
  (out.properties.tags as string[]).push("b");
  assert.deepEqual(current, { address: { city: "Paris" }, tags: ["a"] });
});

// --- checkUpdateProperties ---

Deno.test("checkUpdateProperties: accepts well-formed payloads", () => {
  for (
    const payload of [
      {},
      { update: {}, add: {}, delete: {} },
      { update: { "properties.email": "a@example.com", "properties.a.b.c.d.e": 1 } },
      { add: { "properties.x_1": 1 }, delete: { "properties.y": true } },
      { targetId: "p1", targetType: "profile" },
    ] as UpdatePropertiesPayload[]
  ) {
    assert.equal(checkUpdateProperties(payload), null, JSON.stringify(payload));
  }
});

const BAD_KEYS: { key: string; problem: RegExp }[] = [
  { key: "email", problem: /must start with properties\./ },
  { key: "property.email", problem: /must start with properties\./ },
  { key: "Properties.email", problem: /must start with properties\./ },
  { key: "properties", problem: /must start with properties\./ },
  { key: "", problem: /must start with properties\./ },
  { key: " properties.email", problem: /must start with properties\./ },
  { key: "properties.", problem: /empty path segment/ },
  { key: "properties.a..b", problem: /empty path segment/ },
  { key: "properties..a", problem: /empty path segment/ },
  { key: "properties.a.", problem: /empty path segment/ },
  { key: "properties.a.b.c.d.e.f", problem: /at most 5 levels/ },
  { key: "properties.a.b.c.d.e.f.g.h", problem: /at most 5 levels/ },
  { key: "properties.__proto__", problem: /reserved path segment/ },
  { key: "properties.__proto__.polluted", problem: /reserved path segment/ },
  { key: "properties.a.__proto__", problem: /reserved path segment/ },
  { key: "properties.constructor", problem: /reserved path segment/ },
  { key: "properties.constructor.prototype.polluted", problem: /reserved path segment/ },
  { key: "properties.prototype", problem: /reserved path segment/ },
  { key: "properties.a.prototype.b", problem: /reserved path segment/ },
];

Deno.test("checkUpdateProperties: rejects malformed keys in every section, naming section and key", () => {
  for (const section of ["update", "add", "delete"] as const) {
    for (const { key, problem } of BAD_KEYS) {
      const message = checkUpdateProperties({
        [section]: { "properties.fine": 1, [key]: 1 },
      });
      assert.ok(message, `${section} ${key}`);
      assert.ok(
        message.startsWith(`properties.${section}["${key}"]: `),
        `${section} ${key}: ${message}`,
      );
      assert.match(message, problem, `${section} ${key}`);
    }
  }
});

Deno.test("checkUpdateProperties: reports the first bad key across sections in order update, add, delete", () => {
  const message = checkUpdateProperties({
    delete: { "bad.delete": true },
    add: { "properties.a..b": 1 },
    update: { "properties.ok": 1 },
  });
  assert.equal(message, 'properties.add["properties.a..b"]: empty path segment');
});

// --- prototype pollution ---

const POLLUTING: UpdatePropertiesPayload[] = [
  { update: { "properties.__proto__.polluted": "yes" } },
  { update: { "properties.constructor.prototype.polluted": "yes" } },
  { update: { "properties.a.__proto__.polluted": "yes" } },
  { update: { "properties.__proto__": { polluted: "yes" } } },
  { add: { "properties.__proto__.polluted": "yes" } },
  { add: { "properties.constructor.prototype.polluted": "yes" } },
  { delete: { "properties.__proto__.toString": true } },
  { delete: { "properties.constructor.prototype.toString": true } },
  { delete: { "properties.prototype": true } },
  JSON.parse('{"update": {"__proto__": {"polluted": "yes"}}}'),
];

Deno.test("updateProperties: prototype pollution is rejected by the check", () => {
  for (const payload of POLLUTING) {
    assert.ok(checkUpdateProperties(payload), JSON.stringify(payload));
  }
});

Deno.test("updateProperties: prototype pollution is impossible even when the check is bypassed", () => {
  try {
    for (const payload of POLLUTING) {
      const out = applyUpdateProperties({ a: {} }, payload);
      assert.equal(Object.getPrototypeOf(out.properties), Object.prototype);
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.hasOwn(Object.prototype, "polluted"), false);
    assert.equal(typeof ({}).toString, "function");
    assert.equal(typeof Object.prototype.toString, "function");
  } finally {
    // Never leave the realm polluted for other tests, whatever happened above.
    delete (Object.prototype as Record<string, unknown>).polluted;
  }
});

Deno.test("updateProperties: `changed` ignores key order (Postgres reorders JSONB keys)", () => {
  const current = { address: { zip: "1", city: "x" } };
  assert.equal(
    applyUpdateProperties(current, { update: { "properties.address": { city: "x", zip: "1" } } })
      .changed,
    false,
  );
  assert.equal(
    applyUpdateProperties({ a: 1, b: 2 }, {
      update: { "properties.a": null },
      add: { "properties.a": 1 },
    })
      .changed,
    false,
  );
  assert.equal(
    applyUpdateProperties({ a: [1, 2] }, { update: { "properties.a": [2, 1] } }).changed,
    true,
  );
});

Deno.test("updateProperties: add never replaces a value standing on its path", () => {
  const result = applyUpdateProperties({ o: 5 }, { add: { "properties.o.x": 1 } });
  assert.deepEqual(result, { properties: { o: 5 }, changed: false });
  assert.deepEqual(
    applyUpdateProperties({ o: { y: 2 } }, { add: { "properties.o.x": 1 } }).properties,
    { o: { y: 2, x: 1 } },
  );
});
