import assert from "node:assert/strict";
import {
  compileCondition,
  type Condition,
  type ConditionIssue,
  injectScopePredicate,
  type ItemType,
  parseCondition,
  resolveDateExpr,
  scopePredicate,
  stripScopePredicates,
  validateCondition,
} from "../../../lib/engine/conditions.ts";
import { OPERATORS } from "../../../lib/engine/conditions/vocabulary.ts";
import { regexCost, regexProblem } from "../../../lib/engine/conditions/regex.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { DomainError } from "../../../lib/errors.ts";
import { toHttpError } from "../../../lib/http/errors.ts";
import { freshDatabase } from "../../test_support.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";
const NOW = new Date("2026-11-21T12:00:00.000Z"); // a Saturday

// ---------------------------------------------------------------------------------------------
// Builders

type Params = Record<string, unknown>;
const prop = (
  propertyName: string,
  comparisonOperator: string,
  values: Params = {},
): Condition => ({
  type: "profilePropertyCondition",
  parameterValues: { propertyName, comparisonOperator, ...values },
});
const evProp = (
  propertyName: string,
  comparisonOperator: string,
  values: Params = {},
): Condition => ({
  type: "eventPropertyCondition",
  parameterValues: { propertyName, comparisonOperator, ...values },
});
const and = (...subConditions: Condition[]): Condition => ({
  type: "booleanCondition",
  parameterValues: { operator: "and", subConditions },
});
const or = (...subConditions: Condition[]): Condition => ({
  type: "booleanCondition",
  parameterValues: { operator: "or", subConditions },
});
const not = (subCondition: Condition): Condition => ({
  type: "notCondition",
  parameterValues: { subCondition },
});
const matchAll: Condition = { type: "matchAllCondition", parameterValues: {} };
const eventType = (eventTypeId: string): Condition => ({
  type: "eventTypeCondition",
  parameterValues: { eventTypeId },
});
const past = (eventCondition: Condition, extra: Params = {}): Condition => ({
  type: "pastEventCondition",
  parameterValues: { eventCondition, ...extra },
});

function issues(raw: unknown, itemType: ItemType = "profile", allowScope = false) {
  const result = validateCondition(raw, { itemType, allowScope });
  return result.ok ? [] : result.issues;
}

function paths(list: ConditionIssue[]): string[] {
  return list.map((i) => i.path);
}

function assertValid(raw: unknown, itemType: ItemType = "profile", allowScope = false) {
  assert.deepEqual(issues(raw, itemType, allowScope), [], JSON.stringify(raw));
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

// One valid sample per value parameter.
const SAMPLES: Record<string, unknown> = {
  propertyValue: "a",
  propertyValueInteger: 1,
  propertyValueDouble: 1.5,
  propertyValueDate: "2026-01-01T00:00:00Z",
  propertyValueDateExpr: "now-1d",
  propertyValues: ["a", "b"],
  propertyValuesInteger: [1, 2],
  propertyValuesDouble: [1.5, 2.5],
  propertyValuesDate: ["2026-01-01T00:00:00Z", "2026-02-01"],
  propertyValuesDateExpr: ["now-2d", "now/d"],
};
const VALUE_KEYS = Object.keys(SAMPLES);
const SINGLE = VALUE_KEYS.slice(0, 5);
const PLURAL = VALUE_KEYS.slice(5);

// The contract: which value parameters each operator takes (written out, not derived).
const OPERATOR_VALUES: Record<string, string[]> = {
  equals: SINGLE,
  notEquals: SINGLE,
  greaterThan: SINGLE,
  greaterThanOrEqualTo: SINGLE,
  lessThan: SINGLE,
  lessThanOrEqualTo: SINGLE,
  between: PLURAL,
  exists: [],
  missing: [],
  contains: ["propertyValue"],
  notContains: ["propertyValue"],
  startsWith: ["propertyValue"],
  endsWith: ["propertyValue"],
  matchesRegex: ["propertyValue"],
  in: PLURAL,
  notIn: PLURAL,
  all: PLURAL,
  inContains: ["propertyValues"],
  hasSomeOf: PLURAL,
  hasNoneOf: PLURAL,
  isDay: ["propertyValueDate", "propertyValueDateExpr"],
  isNotDay: ["propertyValueDate", "propertyValueDateExpr"],
};

// ---------------------------------------------------------------------------------------------
// Validation (pure)

Deno.test("conditions: the vocabulary is Unomi 2.7's operators without distance", () => {
  assert.deepEqual([...OPERATORS.keys()].sort(), Object.keys(OPERATOR_VALUES).sort());
});

Deno.test("conditions: every condition type validates in its context", () => {
  const profileTree = and(
    prop("properties.email", "exists"),
    or(matchAll, not(prop("itemId", "equals", { propertyValue: "x" }))),
    past(
      and(
        eventType("order_created"),
        evProp("properties.total", "greaterThan", { propertyValueDouble: 10 }),
      ),
      {
        numberOfDays: 30,
        minimumEventCount: 2,
        maximumEventCount: 5,
        operator: "eventsOccurred",
      },
    ),
    past(eventType("refund_issued"), { fromDate: "now-1M/M", toDate: "2026-11-01T00:00:00Z" }),
    past(matchAll, { operator: "eventsNotOccurred" }),
  );
  assertValid(profileTree);
  assertValid(
    and(eventType("page_viewed"), not(evProp("flattenedProperties.channel", "missing")), matchAll),
    "event",
  );
  for (
    const name of [
      "properties.a",
      "properties.a.b.c.d.e",
      "properties._x9",
      "itemId",
      "properties.firstVisit",
      "properties.lastVisit",
      "properties.nbOfVisits",
    ]
  ) assertValid(prop(name, "exists"));
  for (
    const name of [
      "properties.a",
      "flattenedProperties.a.b",
      "timeStamp",
      "eventType",
      "profileId",
      "sessionId",
      "itemId",
      "target.itemId",
      "target.itemType",
    ]
  ) assertValid(evProp(name, "exists"), "event");
});

Deno.test("conditions: each operator takes exactly its value parameters", () => {
  for (const [operator, allowed] of Object.entries(OPERATOR_VALUES)) {
    for (const key of VALUE_KEYS) {
      const found = issues(prop("properties.x", operator, { [key]: SAMPLES[key] }));
      if (allowed.includes(key)) assert.deepEqual(found, [], `${operator} ${key}`);
      else {
        assert.deepEqual(paths(found), [`$.parameterValues.${key}`], `${operator} ${key}`);
        assert.match(found[0]!.message, /is not used by comparisonOperator/);
      }
    }
    const none = issues(prop("properties.x", operator));
    if (allowed.length === 0) assert.deepEqual(none, [], operator);
    else {
      assert.deepEqual(paths(none), ["$.parameterValues"], operator);
      assert.match(none[0]!.message, new RegExp(`${operator} needs one of ${allowed[0]}`));
    }
  }
});

Deno.test("conditions: missing, extra and malformed parameters are reported at their paths", () => {
  const cases: [unknown, string[]][] = [
    [null, ["$"]],
    [[matchAll], ["$"]],
    ["matchAllCondition", ["$"]],
    [{ type: "matchAllCondition", parameterValues: null }, ["$.parameterValues"]],
    [{ type: "matchAllCondition", parameterValues: [] }, ["$.parameterValues"]],
    [{ type: "matchAllCondition", parameterValues: { x: 1 } }, ["$.parameterValues.x"]],
    [{ parameterValues: {} }, ["$.type"]],
    [{ type: 7, parameterValues: {} }, ["$.type"]],
    [{ type: "idsCondition", parameterValues: {} }, ["$.type"]],
    [{ ...matchAll, conditionType: {} }, ["$.conditionType"]],
    [{ ...matchAll, "odd key": 1 }, ['$["odd key"]']],
    [{ type: "booleanCondition", parameterValues: {} }, [
      "$.parameterValues.operator",
      "$.parameterValues.subConditions",
    ]],
    [{ type: "booleanCondition", parameterValues: { operator: "AND", subConditions: [] } }, [
      "$.parameterValues.operator",
      "$.parameterValues.subConditions",
    ]],
    [{ type: "booleanCondition", parameterValues: { operator: "or", subConditions: {} } }, [
      "$.parameterValues.subConditions",
    ]],
    [{ type: "notCondition", parameterValues: {} }, ["$.parameterValues.subCondition"]],
    [{ type: "notCondition", parameterValues: { subCondition: matchAll, subConditions: [] } }, [
      "$.parameterValues.subConditions",
    ]],
    [{ type: "profilePropertyCondition", parameterValues: {} }, [
      "$.parameterValues.propertyName",
      "$.parameterValues.comparisonOperator",
    ]],
    [prop("properties.a", "equals", { propertyValue: "x", value: "x" }), [
      "$.parameterValues.value",
    ]],
    [prop("properties.a", "equals", { propertyValue: "x", propertyValueInteger: 1 }), [
      "$.parameterValues.propertyValueInteger",
    ]],
    [prop("properties.a", "exists", { propertyValue: "x" }), ["$.parameterValues.propertyValue"]],
    [prop("properties.a", "like", { propertyValue: "x" }), [
      "$.parameterValues.comparisonOperator",
    ]],
    [prop("properties.a", "between", { propertyValuesInteger: [1, 2, 3] }), [
      "$.parameterValues.propertyValuesInteger",
    ]],
    [past({ type: "eventTypeCondition", parameterValues: { eventTypeId: "" } }), [
      "$.parameterValues.eventCondition.parameterValues.eventTypeId",
    ]],
    [past(matchAll, { numberOfDays: 0 }), ["$.parameterValues.numberOfDays"]],
    [past(matchAll, { numberOfDays: 7, fromDate: "now-7d" }), ["$.parameterValues.numberOfDays"]],
    [past(matchAll, { fromDate: "last week", toDate: true }), [
      "$.parameterValues.fromDate",
      "$.parameterValues.toDate",
    ]],
    [past(matchAll, { operator: "sometimes" }), ["$.parameterValues.operator"]],
    [past(matchAll, { minimumEventCount: -1, maximumEventCount: 1.5 }), [
      "$.parameterValues.minimumEventCount",
      "$.parameterValues.maximumEventCount",
    ]],
    [past(matchAll, { minimumEventCount: 3, maximumEventCount: 2 }), [
      "$.parameterValues.maximumEventCount",
    ]],
    [past(matchAll, { maximumEventCount: 0 }), ["$.parameterValues.maximumEventCount"]],
    [past(matchAll, { operator: "eventsNotOccurred", minimumEventCount: 2 }), [
      "$.parameterValues.minimumEventCount",
    ]],
    [{ type: "pastEventCondition", parameterValues: { numberOfDays: 3 } }, [
      "$.parameterValues.eventCondition",
    ]],
  ];
  for (const [raw, expected] of cases) {
    assert.deepEqual(paths(issues(raw)), expected, JSON.stringify(raw));
  }
  assertValid(past(matchAll, { minimumEventCount: 0, maximumEventCount: 0 }));
});

Deno.test("conditions: wrong value kinds are reported, item by item", () => {
  const cases: [Params, string[], RegExp][] = [
    [{ propertyValue: 5 }, ["propertyValue"], /must be a string/],
    [{ propertyValueInteger: "5x" }, ["propertyValueInteger"], /must be an integer/],
    [{ propertyValueInteger: "1.5" }, ["propertyValueInteger"], /must be an integer/],
    [{ propertyValueInteger: 1.5 }, ["propertyValueInteger"], /must be an integer/],
    [{ propertyValueInteger: 2 ** 60 }, ["propertyValueInteger"], /must be an integer/],
    [{ propertyValueDouble: "1.5.2" }, ["propertyValueDouble"], /must be a number/],
    [{ propertyValueDouble: "Infinity" }, ["propertyValueDouble"], /must be a number/],
    [{ propertyValueDouble: null }, ["propertyValueDouble"], /must be a number/],
    [{ propertyValueDate: "2026-02-30T00:00:00Z" }, ["propertyValueDate"], /ISO 8601/],
    [{ propertyValueDate: "now" }, ["propertyValueDate"], /ISO 8601/],
    [{ propertyValueDate: 1.5 }, ["propertyValueDate"], /epoch milliseconds/],
    [{ propertyValueDate: "2026" }, ["propertyValueDate"], /epoch milliseconds/],
    [{ propertyValueDate: "99999999999999999" }, ["propertyValueDate"], /ISO 8601/],
    [{ propertyValueDateExpr: "now-1x" }, ["propertyValueDateExpr"], /date math/],
    [{ propertyValueDateExpr: "" }, ["propertyValueDateExpr"], /date math/],
  ];
  for (const [values, keys, message] of cases) {
    const found = issues(prop("properties.a", "equals", values));
    assert.deepEqual(
      paths(found),
      keys.map((k) => `$.parameterValues.${k}`),
      JSON.stringify(values),
    );
    assert.match(found[0]!.message, message);
  }
  const lists: [Params, string[]][] = [
    [{ propertyValues: [] }, ["propertyValues"]],
    [{ propertyValues: "a" }, ["propertyValues"]],
    [{ propertyValues: ["a", 1, "b", null] }, ["propertyValues[1]", "propertyValues[3]"]],
    [{ propertyValuesInteger: [1, "2x"] }, ["propertyValuesInteger[1]"]],
    [{ propertyValuesDouble: [1, 2.5, "x"] }, ["propertyValuesDouble[2]"]],
    [{ propertyValuesDate: ["2026-01-01", "2026-13-01"] }, ["propertyValuesDate[1]"]],
    [{ propertyValuesDateExpr: ["now", "soon"] }, ["propertyValuesDateExpr[1]"]],
    [{ propertyValues: Array.from({ length: 1001 }, (_, i) => `v${i}`) }, ["propertyValues"]],
  ];
  for (const [values, keys] of lists) {
    assert.deepEqual(
      paths(issues(prop("properties.a", "in", values))),
      keys.map((k) => `$.parameterValues.${k}`),
      JSON.stringify(values).slice(0, 80),
    );
  }
  assertValid(prop("properties.a", "in", { propertyValues: Array.from({ length: 1000 }, String) }));
});

Deno.test("conditions: columns accept only their value kinds", () => {
  const cases: [Condition, string, RegExp][] = [
    [
      prop("properties.firstVisit", "greaterThan", { propertyValue: "2026-01-01" }),
      "propertyValue",
      /a date field \(use propertyValueDate or propertyValueDateExpr\)/,
    ],
    [
      prop("properties.nbOfVisits", "equals", { propertyValue: "3" }),
      "propertyValue",
      /a number field/,
    ],
    [prop("itemId", "equals", { propertyValueInteger: 3 }), "propertyValueInteger", /a text field/],
    [
      prop("properties.nbOfVisits", "contains", { propertyValue: "3" }),
      "comparisonOperator",
      /does not apply/,
    ],
    [
      prop("properties.lastVisit", "inContains", { propertyValues: ["x"] }),
      "comparisonOperator",
      /does not apply/,
    ],
    [
      prop("itemId", "isDay", { propertyValueDate: "2026-01-01" }),
      "comparisonOperator",
      /does not apply/,
    ],
  ];
  for (const [condition, key, message] of cases) {
    const found = issues(condition);
    assert.equal(found[0]?.path, `$.parameterValues.${key}`, JSON.stringify(condition));
    assert.match(found[0]!.message, message);
  }
  assert.deepEqual(
    paths(issues(evProp("timeStamp", "between", { propertyValues: ["a", "b"] }), "event")),
    ["$.parameterValues.propertyValues"],
  );
  assertValid(prop("properties.firstVisit", "isDay", { propertyValueDateExpr: "now-1d" }));
  assertValid(prop("properties.nbOfVisits", "between", { propertyValuesDouble: [1, 2.5] }));
  assertValid(prop("itemId", "matchesRegex", { propertyValue: "store_.*" }));
  assertValid(evProp("timeStamp", "in", { propertyValuesDate: ["2026-01-01"] }), "event");
});

Deno.test("conditions: property names outside the allowlist are rejected", () => {
  for (
    const name of [
      "systemProperties.lastUpdated",
      "properties",
      "properties.",
      "properties.a..b",
      "properties.a.b.c.d.e.f",
      "properties.1abc",
      "properties.a-b",
      "properties.a b",
      `properties.${"a".repeat(65)}`,
      "segments",
      "scores.x",
      "email",
      "Properties.email",
      "properties.a'); drop table profiles; --",
      "properties.__proto__x)",
    ]
  ) {
    assert.deepEqual(paths(issues(prop(name, "exists"))), ["$.parameterValues.propertyName"], name);
  }
  assert.match(issues(prop("systemProperties.x", "exists"))[0]!.message, /systemProperties/);
  for (const name of ["flattenedProperties.a", "eventType", "timeStamp", "target.itemId"]) {
    assert.equal(issues(prop(name, "exists")).length, 1, name); // event fields on profiles
  }
  for (
    const name of [
      "properties.firstVisit.x.y.z.w.v",
      "target",
      "target.properties",
      "target.properties.a.b.c.d.e.f",
      "target.scope",
      "source",
    ]
  ) {
    assert.equal(issues(evProp(name, "exists"), "event").length, 1, name);
  }
  // A "__proto__" key is an own key like any other: an unknown parameter, never a prototype.
  assert.deepEqual(paths(issues(prop("properties.a", "exists", { ["__proto__"]: 1 }))), [
    "$.parameterValues.__proto__",
  ]);
  const proto = JSON.parse('{"type":"matchAllCondition","parameterValues":{"__proto__":{"x":1}}}');
  assert.deepEqual(paths(issues(proto)), ["$.parameterValues.__proto__"]);
});

Deno.test("conditions: conditions are only allowed in their context", () => {
  assert.match(issues(eventType("x"))[0]!.message, /not allowed in a profile condition/);
  assert.match(issues(evProp("properties.a", "exists"))[0]!.message, /pastEventCondition/);
  assert.deepEqual(paths(issues(prop("properties.a", "exists"), "event")), ["$.type"]);
  assert.deepEqual(paths(issues(past(matchAll), "event")), ["$.type"]);
  assert.deepEqual(paths(issues(past(prop("properties.a", "exists")))), [
    "$.parameterValues.eventCondition.type",
  ]);
  assert.deepEqual(paths(issues(past(past(matchAll)))), ["$.parameterValues.eventCondition.type"]);
  assert.deepEqual(paths(issues(past(and(eventType("a"), not(prop("itemId", "exists")))))), [
    "$.parameterValues.eventCondition.parameterValues.subConditions[1].parameterValues.subCondition.type",
  ]);
});

Deno.test("conditions: script and parameter resolvers are rejected wherever they appear", () => {
  const tree = and(
    prop("properties.a", "equals", { propertyValue: "script::Runtime.getRuntime().exec('x')" }),
    prop("script::properties.a", "exists"),
    prop("properties.a", "script::equals"),
    prop("properties.a", "in", { propertyValues: ["ok", "parameter::profile"] }),
    past(eventType("script::x"), { fromDate: "script::now" }),
    {
      type: "booleanCondition",
      parameterValues: { operator: "script::and", subConditions: [matchAll] },
    },
  );
  const found = issues(tree);
  assert.deepEqual(paths(found), [
    "$.parameterValues.subConditions[0].parameterValues.propertyValue",
    "$.parameterValues.subConditions[1].parameterValues.propertyName",
    "$.parameterValues.subConditions[2].parameterValues.comparisonOperator",
    "$.parameterValues.subConditions[3].parameterValues.propertyValues[1]",
    "$.parameterValues.subConditions[4].parameterValues.eventCondition.parameterValues.eventTypeId",
    "$.parameterValues.subConditions[4].parameterValues.fromDate",
    "$.parameterValues.subConditions[5].parameterValues.operator",
  ]);
  assert.ok(found.every((i) => /^(script|parameter):: resolvers are out of scope/.test(i.message)));
});

Deno.test("conditions: depth and size limits", () => {
  const chain = (levels: number): Condition => {
    let node = matchAll;
    for (let i = 1; i < levels; i++) node = not(node);
    return node;
  };
  assertValid(chain(10));
  const deep = issues(chain(11));
  assert.deepEqual(deep, [{
    path: "$" + ".parameterValues.subCondition".repeat(10),
    message: "nested deeper than 10 levels",
  }]);
  // pastEventCondition's eventCondition counts as a level.
  let eventChain = eventType("x");
  for (let i = 0; i < 8; i++) eventChain = not(eventChain);
  assertValid(past(eventChain));
  assert.equal(issues(not(past(eventChain))).length, 1);

  assertValid(or(...Array.from({ length: 199 }, () => matchAll)));
  assert.deepEqual(issues(or(...Array.from({ length: 200 }, () => matchAll))), [{
    path: "$.parameterValues.subConditions[199]",
    message: "the condition has more than 200 nodes",
  }]);
  // A huge tree is cut short: one issue for the size, not one per node.
  const huge = issues(
    or(...Array.from({ length: 5000 }, () => ({ type: "x" }) as unknown as Condition)),
  );
  assert.ok(huge.length <= 101);
  const many = issues(
    or(...Array.from({ length: 150 }, () => ({ type: "bogus", parameterValues: {} }))),
  );
  assert.equal(many.length, 101);
  assert.deepEqual(many.at(-1), {
    path: "$",
    message: "more than 100 issues; only the first ones are listed",
  });
});

Deno.test("conditions: scopeInjected leaves the scope predicate its level and nodes", () => {
  const chain = (levels: number): Condition => {
    let node = matchAll;
    for (let i = 1; i < levels; i++) node = not(node);
    return node;
  };
  const injected = (raw: unknown) =>
    validateCondition(raw, { itemType: "profile", scopeInjected: true });
  const branches = (n: number) => or(...Array.from({ length: n }, () => matchAll));
  const note = " (the scope predicate the service adds takes the rest)";
  // The largest trees accepted stay within the limits once the predicate is AND-injected, as
  // the compiler validates them.
  for (const raw of [branches(197), chain(9)]) {
    assert.equal(injected(raw).ok, true);
    const full = validateCondition(injectScopePredicate(raw as Condition, A), {
      itemType: "profile",
      allowScope: true,
    });
    assert.equal(full.ok, true);
  }
  // One more is refused up front instead of failing once injected (199 branches: spec issue 14).
  for (const n of [198, 199]) {
    assert.deepEqual(injected(branches(n)), {
      ok: false,
      issues: [{
        path: "$.parameterValues.subConditions[197]",
        message: `the condition has more than 198 nodes${note}`,
      }],
    });
  }
  assert.deepEqual(injected(chain(10)), {
    ok: false,
    issues: [{
      path: "$" + ".parameterValues.subCondition".repeat(9),
      message: `nested deeper than 9 levels${note}`,
    }],
  });
  // Without the option the limits are the compiler's own.
  assertValid(branches(199));
  assertValid(chain(10));
});

Deno.test("conditions: a NUL or an unpaired surrogate is refused wherever a string is taken", () => {
  const bad = ["a\0b", "\ud800", "x\udc00y", "\udc00\ud800"];
  const message = "must not contain a NUL character or an unpaired surrogate";
  for (const text of bad) {
    const cases: [Condition, string, ItemType?][] = [
      [
        prop("properties.email", "equals", { propertyValue: text }),
        ".parameterValues.propertyValue",
      ],
      [
        prop("properties.tags", "in", { propertyValues: ["ok", text] }),
        ".parameterValues.propertyValues[1]",
      ],
      [
        prop("properties.email", "matchesRegex", { propertyValue: text }),
        ".parameterValues.propertyValue",
      ],
      [prop(`properties.${text}`, "exists"), ".parameterValues.propertyName"],
      [prop("properties.email", text), ".parameterValues.comparisonOperator"],
      [eventType(text), ".parameterValues.eventTypeId", "event"],
      [past(eventType("order"), { fromDate: text }), ".parameterValues.fromDate"],
      [{ type: text, parameterValues: {} }, ".type"],
    ];
    for (const [raw, path, itemType] of cases) {
      assert.deepEqual(issues(raw, itemType), [{ path: `$${path}`, message }], JSON.stringify(raw));
    }
  }
  // A well-formed pair (an emoji) is an ordinary character.
  assertValid(prop("properties.email", "equals", { propertyValue: "a\ud83d\ude00b" }));
});

Deno.test("conditions: every issue of a tree is reported at once, with JSON paths", () => {
  const tree = {
    type: "booleanCondition",
    parameterValues: {
      operator: "xor",
      subConditions: [
        prop("properties.age", "equals", { propertyValueInteger: 1.5 }),
        { type: "nestedCondition", parameterValues: {} },
        prop("systemProperties.x", "like", { propertyValue: "script::x" }),
        eventType("page_viewed"),
        { ...not({ type: "matchAllCondition", parameterValues: { extra: 1 } }), note: "?" },
        prop("properties.shopDomain", "equals", { propertyValue: A }),
      ],
    },
  };
  const found = issues(tree);
  assert.deepEqual(paths(found), [
    "$.parameterValues.operator",
    "$.parameterValues.subConditions[0].parameterValues.propertyValueInteger",
    "$.parameterValues.subConditions[1].type",
    "$.parameterValues.subConditions[2].parameterValues.propertyName",
    "$.parameterValues.subConditions[2].parameterValues.comparisonOperator",
    "$.parameterValues.subConditions[2].parameterValues.propertyValue",
    "$.parameterValues.subConditions[3].type",
    "$.parameterValues.subConditions[4].note",
    "$.parameterValues.subConditions[4].parameterValues.subCondition.parameterValues.extra",
    "$.parameterValues.subConditions[5].parameterValues.propertyName",
  ]);
  assert.match(found[2]!.message, /^nestedCondition is out of scope: /);
  // parseCondition: 400 invalid_condition listing every "path: message", under the given root.
  const err = assert.throws(
    () => parseCondition(tree, { itemType: "profile", root: "$.condition" }),
    (e: unknown) =>
      e instanceof DomainError && toHttpError(e).status === 400 &&
      toHttpError(e).code === "invalid_condition",
  );
  void err;
  try {
    parseCondition(tree, { itemType: "profile", root: "$.condition" });
  } catch (e) {
    const description = (e as DomainError).message;
    for (const path of paths(found)) {
      assert.ok(description.includes(path.replace("$", "$.condition")));
    }
    assert.ok(description.includes('$.condition.parameterValues.operator: must be "and" or "or"'));
  }
  const ok = parseCondition(matchAll, { itemType: "event" });
  assert.deepEqual(ok.json, matchAll);
  assert.deepEqual(ok.tree, { type: "matchAll" });
});

Deno.test("conditions: a validated tree is a copy of the input", () => {
  const input = and(prop("properties.a", "in", { propertyValues: ["x"] }));
  const result = validateCondition(input, { itemType: "profile" });
  assert.ok(result.ok);
  (input.parameterValues.subConditions as Condition[]).push(matchAll);
  assert.equal((result.condition.parameterValues.subConditions as Condition[]).length, 1);
});

Deno.test("conditions: scope references are refused unless allowScope", () => {
  const names = [
    "properties.shopDomain",
    "properties.scope",
    "scope",
    "shopDomain",
    "properties.address.shopDomain",
  ];
  for (const name of names) {
    const found = issues(prop(name, "equals", { propertyValue: A }));
    assert.deepEqual(paths(found), ["$.parameterValues.propertyName"], name);
    assert.match(found[0]!.message, /must not reference scope or shopDomain/);
    assertValid(prop(name, "equals", { propertyValue: A }), "profile", true);
  }
  // At any depth, in event conditions too.
  const nested = and(matchAll, or(not(past(evProp("properties.shopDomain", "exists")))));
  assert.deepEqual(paths(issues(nested)), [
    "$.parameterValues.subConditions[1].parameterValues.subConditions[0].parameterValues" +
    ".subCondition.parameterValues.eventCondition.parameterValues.propertyName",
  ]);
  assertValid(nested, "profile", true);
  assert.equal(issues(evProp("scope", "equals", { propertyValue: A }), "event").length, 1);
  assertValid(evProp("scope", "equals", { propertyValue: A }), "event", true);
  // The injected predicate validates only with allowScope.
  const injected = injectScopePredicate(prop("properties.a", "exists"), A);
  assert.equal(issues(injected).length, 1);
  assertValid(injected, "profile", true);
});

Deno.test("conditions: matchesRegex accepts the subset JavaScript and Postgres agree on", () => {
  const rejected: [string, RegExp][] = [
    ["(", /not a valid regular expression/],
    ["(?i)abc", /not a valid regular expression/],
    ["a".repeat(201), /at most 200 characters/],
    ["(a)\\1", /unsupported escape \\1/],
    ["(?<name>a)", /unsupported group/],
    ["\\bword\\b", /unsupported escape \\b/],
    ["\\x41", /unsupported escape \\x/],
    ["\\p{L}", /unsupported escape \\p/],
    ["[[:alpha:]]", /POSIX bracket/],
    ["[\\d-z]", /class range/],
    ["[a-c-e]", /class range/],
    ["[]a]", /starting with \]/],
    ["[^]", /starting with \]/],
    ["a{256}", /over 255/],
    ["a{1", /literal \{/],
    ["x{,5}", /literal \{/],
    ["(?=a)*b", /quantifier/],
    ["(a{200}){200}", /too complex/],
    // A class weighs its colors: 10,000 copies of one cost PostgreSQL as much as 140,000 of a.
    ["([a-zA-Z0-9_.+-]{100}){100}", /too complex/],
    // Runs of optional items: PostgreSQL refused the first ("too complex") and took 0.3 s to
    // compile the second, each for a pattern the validator used to accept.
    ["(.?){255}".repeat(22), /too costly/],
    ["(.?){255}(.?){255}", /too costly/],
    ["(.?){255}", /too costly/],
    ["((a?){99}){99}", /too costly/],
    ["(a*){200}", /too costly/],
    ["(?:.*){200}", /too costly/],
    ["(\\w?){64}", /too costly/],
    ["(.?){100}.{0,255}", /too costly/],
  ];
  for (const [pattern, message] of rejected) {
    const found = issues(prop("properties.a", "matchesRegex", { propertyValue: pattern }));
    assert.deepEqual(paths(found), ["$.parameterValues.propertyValue"], pattern);
    assert.match(found[0]!.message, message, pattern);
  }
  for (const pattern of ACCEPTED_PATTERNS) {
    assertValid(prop("properties.a", "matchesRegex", { propertyValue: pattern }));
  }
  // The figures docs/conditions.md gives for the cost rule.
  const figures: [string, number, number][] = [
    ["(.?){100}", 100, 5050],
    ["(.?){127}", 127, 8128],
    ["(.?){128}", 128, 8256],
    [".{0,255}", 255, 255],
    ["(a{100}){100}", 10_000, 0],
    ["([a-zA-Z0-9_.+-]{100}){100}", 160_000, 0],
  ];
  for (const [pattern, items, cost] of figures) {
    assert.deepEqual(regexCost(pattern), { items, cost }, pattern);
  }
  // Nesting past any number is refused, never accepted as NaN.
  const nested = "(".repeat(60) + "a?" + "){255}".repeat(60);
  assert.match(regexProblem(nested.slice(0, 200)) ?? "", /too complex|too costly|valid/);
  assert.match(regexProblem("((((((((a?){255}){255}){255}){255}){255}){255}){255}){255}")!, /too/);
});

// Accepted by the validator; the database test below runs each one on Postgres.
const ACCEPTED_PATTERNS = [
  "[a-z]+@example\\.(com|org)",
  "^abc$",
  "a|b|",
  "(?:ab)+?c*?",
  "\\d{3}-\\d{4}",
  "[\\w.+-]+",
  "(?<=a)b",
  "(?<!a)b",
  "(?!x).",
  "[-a]",
  "[a-]",
  "[\\]a]",
  "\\.\\*\\{\\}\\(\\)\\[\\]\\\\",
  "x}",
  "]",
  "(a{100}){100}",
  "([a-zA-Z0-9_.+-]{10}){50}",
  "(.?){100}",
  ".{0,255}(.?){100}",
  "(?:.*a){200}",
  "(\\w+\\s?){255}",
  "a{2,}b{0,255}",
  "\\s\\S\\w\\W\\d\\D\\t\\n",
  "()",
  "é+ü?",
];

Deno.test("conditions: resolveDateExpr parses Unomi/Elasticsearch date math", () => {
  const now = new Date("2026-11-21T12:34:56.789Z"); // a Saturday
  const cases: [string, string | null, boolean?][] = [
    ["now", "2026-11-21T12:34:56.789Z"],
    ["now-30d", "2026-10-22T12:34:56.789Z"],
    ["now-1M/M", "2026-10-01T00:00:00.000Z"],
    ["now+2h/h", "2026-11-21T14:00:00.000Z"],
    ["now+2H/H", "2026-11-21T14:00:00.000Z"],
    ["now/w", "2026-11-16T00:00:00.000Z"],
    ["now/y", "2026-01-01T00:00:00.000Z"],
    ["now-90m/m", "2026-11-21T11:04:00.000Z"],
    ["now+10s/s", "2026-11-21T12:35:06.000Z"],
    ["now-1y-2M+3w/d", "2025-10-12T00:00:00.000Z"],
    ["2026-01-01T00:00:00Z||+1d/d", "2026-01-02T00:00:00.000Z"],
    ["2026-01-31T10:00:00Z||+1M", "2026-02-28T10:00:00.000Z"],
    ["2024-02-29||+1y", "2025-02-28T00:00:00.000Z"],
    ["2026-11-21T12:00:00+02:00||/H", "2026-11-21T10:00:00.000Z"],
    ["2026-01-01T00:00:00Z||", "2026-01-01T00:00:00.000Z"],
    ["2026-03-01", "2026-03-01T00:00:00.000Z"],
    ["2026-03-01T10:00", "2026-03-01T10:00:00.000Z"],
    // The upper end of a range: the last millisecond of the rounded unit or partial date.
    ["now/d", "2026-11-21T23:59:59.999Z", true],
    ["now-1M/M", "2026-10-31T23:59:59.999Z", true],
    ["2026-01-31", "2026-01-31T23:59:59.999Z", true],
    ["2026-01-31T10:00", "2026-01-31T10:00:59.999Z", true],
    ["now-30d", "2026-10-22T12:34:56.789Z", true],
    // Invalid.
    ["", null],
    ["now-", null],
    ["now-1x", null],
    ["now - 1d", null],
    ["NOW", null],
    ["yesterday", null],
    ["now||+1d", null],
    ["now-1d/", null],
    ["now-d", null],
    ["2026-02-30||+1d", null],
    ["2026-01-01T00:00:00Z+1d", null],
    ["now+1234567890d", null],
    ["now+999999999y", null],
    ["0001-01-01||-1d", null],
    ["now" + "/d".repeat(11), null],
  ];
  for (const [expr, expected, roundUp] of cases) {
    const resolved = resolveDateExpr(expr, now, { roundUp: roundUp ?? false });
    assert.equal(
      resolved?.toISOString() ?? null,
      expected,
      `${expr}${roundUp ? " (roundUp)" : ""}`,
    );
  }
  assert.equal(
    resolveDateExpr("now" + "/d".repeat(10), now)?.toISOString(),
    "2026-11-21T00:00:00.000Z",
  );
});

Deno.test("conditions: stripScopePredicates and injectScopePredicate round-trip", () => {
  const x = prop("properties.email", "exists");
  const y = past(eventType("order_created"));
  const own = scopePredicate(A);
  const foreign = prop("properties.shopDomain", "notEquals", { propertyValue: B });
  assert.deepEqual(own, {
    type: "profilePropertyCondition",
    parameterValues: {
      propertyName: "properties.shopDomain",
      comparisonOperator: "equals",
      propertyValue: A,
    },
  });
  assert.deepEqual(injectScopePredicate(x, A), and(own, x));
  assert.deepEqual(injectScopePredicate(null, A), own);
  assert.deepEqual(injectScopePredicate(undefined, A), own);
  const cases: [unknown, unknown][] = [
    [injectScopePredicate(x, A), x],
    [injectScopePredicate(and(x, y), A), and(x, y)],
    [own, null],
    [and(foreign, x, y), and(x, y)],
    [
      and(x, prop("scope", "equals", { propertyValue: B }), y, prop("shopDomain", "exists")),
      and(x, y),
    ],
    [and(evProp("properties.scope", "in", { propertyValues: [B] }), x), x],
    [or(own, x), x],
    [and(or(foreign, x), y), and(x, y)],
    [not(own), null],
    [and(not(foreign), x), x],
    [and(own, foreign), null],
    [past(evProp("properties.shopDomain", "exists")), {
      type: "pastEventCondition",
      parameterValues: {},
    }],
    [past(and(evProp("properties.shopDomain", "exists"), eventType("a"))), past(eventType("a"))],
    // Nothing to strip: returned as is, a one-child boolean included.
    [and(x), and(x)],
    [
      prop("properties.address.shopDomain", "exists"),
      prop("properties.address.shopDomain", "exists"),
    ],
    [null, null],
    ["x", "x"],
    [[own], [own]],
    [{ type: "booleanCondition", parameterValues: { operator: "and", subConditions: "x" } }, {
      type: "booleanCondition",
      parameterValues: { operator: "and", subConditions: "x" },
    }],
  ];
  for (const [input, expected] of cases) {
    assert.deepEqual(
      stripScopePredicates(deepFreeze(structuredClone(input))),
      expected,
      JSON.stringify(input),
    );
  }
  // Pure: untouched subtrees are shared, the input is never changed.
  const stored = deepFreeze(injectScopePredicate(and(x, y, or(foreign, x)), A));
  const before = structuredClone(stored);
  const stripped = stripScopePredicates(stored) as Condition;
  assert.deepEqual(stored, before);
  const inner = (stored.parameterValues.subConditions as Condition[])[1]!;
  assert.equal(
    (stripped.parameterValues.subConditions as Condition[])[0],
    (inner.parameterValues.subConditions as Condition[])[0],
  );
  // GET then PUT: strip, validate, re-inject gives back what was stored.
  const condition = parseCondition(stripScopePredicates(stored), { itemType: "profile" });
  assert.deepEqual(injectScopePredicate(condition.json, A), and(own, and(x, y, x)));
  const simple = injectScopePredicate(x, A);
  assert.deepEqual(
    injectScopePredicate(
      parseCondition(stripScopePredicates(simple), { itemType: "profile" }).json,
      A,
    ),
    simple,
  );
  // Deep junk does not exhaust the stack.
  let deep: unknown = own;
  for (let i = 0; i < 100_000; i++) deep = not(deep as Condition);
  assert.ok(stripScopePredicates(deep));
});

// ---------------------------------------------------------------------------------------------
// Compilation, against a real database

const PROFILES: [string, string, Record<string, unknown>, string | null, string | null, number][] =
  [
    [
      A,
      "ann",
      {
        shopDomain: A,
        firstName: "Ann",
        email: "ann@example.com",
        age: 34,
        score: 7.5,
        tags: ["vip", "b2b"],
        codes: [1, 2, 3],
        visits: ["2026-11-20T10:00:00Z", "not a date", 5],
        address: { city: "Paris", zip: "75001" },
        birthday: "1990-05-17",
        lastOrderAt: "2026-11-20T08:30:00Z",
        newsletter: true,
        note: "x'); drop table profiles; --",
      },
      "2026-01-15T10:00:00Z",
      "2026-11-20T09:00:00Z",
      12,
    ],
    [
      A,
      "bob",
      {
        shopDomain: A,
        firstName: "Bob",
        email: "bob@EXAMPLE.com",
        age: "34",
        score: 3,
        tags: "vip",
        address: { city: "Lyon" },
        birthday: "not a date",
        lastOrderAt: "2026-10-01",
        newsletter: false,
        weird: "NULL",
      },
      "2025-06-01T00:00:00Z",
      "2026-10-01T00:00:00Z",
      3,
    ],
    [
      A,
      "cat",
      {
        shopDomain: A,
        firstName: null,
        email: "cat@example.org",
        age: 51,
        tags: [],
        codes: [2],
        lastOrderAt: "2026-11-21T11:59:00+00:00",
      },
      "2026-11-21T09:00:00Z",
      "2026-11-21T11:59:00Z",
      1,
    ],
    [A, "dan", { shopDomain: A }, null, null, 0],
    [
      A,
      "eve",
      {
        shopDomain: A,
        firstName: "Éve",
        email: "eve%_@example.com",
        age: 1000,
        score: -2.5,
        tags: [null],
        address: "Paris",
        lastOrderAt: "2026-11-21T00:00:00.000500Z",
        weird: ["a,b", '{"q"}'],
      },
      null,
      null,
      0,
    ],
    // Same id and values as A's ann, in another scope: must never leak into A's results.
    [
      B,
      "ann",
      {
        shopDomain: B,
        firstName: "Ann",
        email: "ann@example.com",
        age: 34,
        tags: ["vip"],
        lastOrderAt: "2026-11-21T08:00:00Z",
      },
      "2026-01-15T10:00:00Z",
      "2026-11-20T09:00:00Z",
      5,
    ],
  ];

const EVENTS: [
  string,
  string,
  string,
  string,
  string,
  Record<string, unknown>,
  Record<string, unknown>?,
  Record<string, unknown>?,
][] = [
  [A, "ev1", "ann", "page_viewed", "2026-11-20T10:00:00Z", {
    url: "https://acme.myshopify.com/products/tee",
    product: { price: 19.99 },
  }, { channel: "web" }],
  [
    A,
    "ev2",
    "anon_ann",
    "order_created",
    "2026-11-15T10:00:00Z",
    {
      total: 120,
      currency: "EUR",
      items: ["sku1", "sku2"],
    },
    {},
    { itemId: "o1", itemType: "order" },
  ],
  [A, "ev3", "ann", "order_created", "2026-10-01T10:00:00Z", { total: "80" }],
  [A, "ev4", "bob", "page_viewed", "2026-11-21T11:00:00Z", {}],
  [A, "ev5", "bob", "page_viewed", "2026-11-19T10:00:00Z", {}],
  [A, "ev6", "bob", "page_viewed", "2025-01-01T10:00:00Z", {}],
  [A, "ev7", "cat", "order_created", "2026-11-21T09:00:00Z", { total: 40 }],
  // anon_x is an alias of cat only in scope B: not cat's event in A.
  [A, "ev8", "anon_x", "refund_issued", "2026-11-21T10:00:00Z", {}],
  [B, "fv1", "ann", "order_created", "2026-11-20T10:00:00Z", { total: 500 }],
  // dan exists in A only; this event of scope B is not his.
  [B, "fv2", "dan", "order_created", "2026-11-20T10:00:00Z", { total: 1 }],
];

async function seed(sql: Sql): Promise<void> {
  for (const [scope, id, properties, firstVisit, lastVisit, visits] of PROFILES) {
    await sql`
      insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                            nb_of_visits, created_at, updated_at)
      values (${scope}, ${id}, ${sql.json(properties as never)}, 'server',
              ${firstVisit}::timestamptz, ${lastVisit}::timestamptz, ${visits}, now(), now())`;
  }
  for (const [scope, id, profileId, type, time, properties, flattened, target] of EVENTS) {
    await sql`
      insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                          flattened_properties, target, source, received_at)
      values (${scope}, ${id}, ${profileId}, 's', ${type}, ${time}, ${
      sql.json(properties as never)
    },
              ${sql.json((flattened ?? {}) as never)},
              ${target ? sql.json(target as never) : null}::jsonb, 'server', now())`;
  }
  await sql`
    insert into profile_aliases (scope, alias_id, profile_id, merged_at)
    values (${A}, 'anon_ann', 'ann', now()), (${B}, 'anon_x', 'cat', now())`;
}

async function withSeeded(fn: (sql: Sql) => Promise<void>): Promise<void> {
  const db = await freshDatabase();
  try {
    await seed(db.sql);
    await fn(db.sql);
  } finally {
    await db.close();
  }
}

/** The ids of scope's profiles matching an untrusted condition. */
async function profiles(
  sql: Sql,
  raw: unknown,
  options: { scope?: string; allowScope?: boolean; now?: Date; single?: boolean } = {},
): Promise<string[]> {
  const condition = parseCondition(raw, {
    itemType: "profile",
    allowScope: options.allowScope,
    now: options.now ?? NOW,
  });
  const fragment = compileCondition(sql, condition.tree, {
    itemType: "profile",
    scope: options.scope ?? A,
    single: options.single,
  });
  const rows = await sql<{ item_id: string }[]>`
    select item_id from profiles p
    where p.scope = ${options.scope ?? A} and ${fragment}
    order by item_id`;
  return rows.map((r) => r.item_id);
}

async function events(sql: Sql, raw: unknown, scope = A): Promise<string[]> {
  const condition = parseCondition(raw, { itemType: "event", now: NOW });
  const fragment = compileCondition(sql, condition.tree, { itemType: "event", scope });
  const rows = await sql<{ id: string }[]>`
    select id from events e where e.scope = ${scope} and ${fragment} order by id`;
  return rows.map((r) => r.id);
}

async function expectProfiles(sql: Sql, cases: [Condition, string[]][]): Promise<void> {
  for (const [condition, expected] of cases) {
    assert.deepEqual(await profiles(sql, condition), expected, JSON.stringify(condition));
  }
}

Deno.test("compile: equality, order and presence, with Elasticsearch's missing-value rules", async () => {
  await withSeeded(async (sql) => {
    await expectProfiles(sql, [
      [prop("properties.firstName", "equals", { propertyValue: "Ann" }), ["ann"]],
      [prop("properties.firstName", "equals", { propertyValue: "ann" }), []],
      // Negations are true when the property is missing or null.
      [prop("properties.firstName", "notEquals", { propertyValue: "Ann" }), [
        "bob",
        "cat",
        "dan",
        "eve",
      ]],
      [prop("properties.firstName", "exists"), ["ann", "bob", "eve"]],
      [prop("properties.firstName", "missing"), ["cat", "dan"]],
      // Typed: an integer compares with JSON numbers only; a string value compares as text.
      [prop("properties.age", "equals", { propertyValueInteger: 34 }), ["ann"]],
      [prop("properties.age", "equals", { propertyValue: "34" }), ["ann", "bob"]],
      [prop("properties.age", "notEquals", { propertyValueInteger: 34 }), [
        "bob",
        "cat",
        "dan",
        "eve",
      ]],
      [prop("properties.age", "greaterThan", { propertyValueInteger: 34 }), ["cat", "eve"]],
      [prop("properties.age", "greaterThanOrEqualTo", { propertyValueInteger: 34 }), [
        "ann",
        "cat",
        "eve",
      ]],
      [prop("properties.age", "lessThan", { propertyValueInteger: 51 }), ["ann"]],
      [prop("properties.age", "lessThanOrEqualTo", { propertyValueDouble: 51 }), ["ann", "cat"]],
      [prop("properties.age", "between", { propertyValuesInteger: [34, 51] }), ["ann", "cat"]],
      [prop("properties.age", "between", { propertyValuesInteger: [51, 34] }), []],
      [prop("properties.score", "between", { propertyValuesDouble: [3, 7.5] }), ["ann", "bob"]],
      [prop("properties.score", "lessThan", { propertyValueDouble: 0 }), ["eve"]],
      [prop("properties.age", "in", { propertyValuesInteger: [51, 1000] }), ["cat", "eve"]],
      [prop("properties.age", "notIn", { propertyValuesDouble: [51, 1000] }), [
        "ann",
        "bob",
        "dan",
      ]],
      // Text order is by code point ("B" < "a"), on every server.
      [prop("properties.firstName", "greaterThan", { propertyValue: "B" }), ["bob", "eve"]],
      [prop("properties.firstName", "between", { propertyValues: ["A", "Bz"] }), ["ann", "bob"]],
      [prop("properties.firstName", "lessThan", { propertyValue: "Bob" }), ["ann"]],
      [prop("properties.firstName", "lessThan", { propertyValue: "a" }), ["ann", "bob"]],
      // A string that is not a number, a number that is not a date: no match, no error.
      [prop("properties.email", "greaterThan", { propertyValueInteger: 0 }), []],
      [prop("properties.age", "greaterThan", { propertyValueDateExpr: "now-100y" }), []],
      // Nested paths, objects, booleans.
      [prop("properties.address.city", "equals", { propertyValue: "Paris" }), ["ann"]],
      [prop("properties.address", "equals", { propertyValue: "Paris" }), ["eve"]],
      [prop("properties.address", "exists"), ["ann", "bob", "eve"]],
      [prop("properties.address.city", "exists"), ["ann", "bob"]],
      [prop("properties.newsletter", "equals", { propertyValue: "true" }), ["ann"]],
      [prop("properties.newsletter", "notEquals", { propertyValue: "true" }), [
        "bob",
        "cat",
        "dan",
        "eve",
      ]],
      [prop("properties.nothing.at.all", "missing"), ["ann", "bob", "cat", "dan", "eve"]],
      // Columns.
      [prop("itemId", "equals", { propertyValue: "ann" }), ["ann"]],
      [prop("itemId", "in", { propertyValues: ["ann", "bob", "zed"] }), ["ann", "bob"]],
      [prop("itemId", "startsWith", { propertyValue: "c" }), ["cat"]],
      [prop("properties.nbOfVisits", "greaterThanOrEqualTo", { propertyValueInteger: 3 }), [
        "ann",
        "bob",
      ]],
      [prop("properties.nbOfVisits", "equals", { propertyValueDouble: 0 }), ["dan", "eve"]],
      [prop("properties.nbOfVisits", "exists"), ["ann", "bob", "cat", "dan", "eve"]],
      [prop("properties.firstVisit", "exists"), ["ann", "bob", "cat"]],
      [prop("properties.firstVisit", "missing"), ["dan", "eve"]],
      [
        prop("properties.firstVisit", "greaterThan", { propertyValueDate: "2026-01-01T00:00:00Z" }),
        ["ann", "cat"],
      ],
      [prop("properties.firstVisit", "lessThan", { propertyValueDateExpr: "now-1y" }), ["bob"]],
      [prop("properties.firstVisit", "notEquals", { propertyValueDate: "2026-01-15" }), [
        "bob",
        "cat",
        "dan",
        "eve",
      ]],
      [prop("properties.lastVisit", "isDay", { propertyValueDateExpr: "now" }), ["cat"]],
      [prop("properties.lastVisit", "isNotDay", { propertyValueDateExpr: "now" }), [
        "ann",
        "bob",
        "dan",
        "eve",
      ]],
    ]);
  });
});

Deno.test("compile: arrays match when any element does; text operators are literal", async () => {
  await withSeeded(async (sql) => {
    await expectProfiles(sql, [
      [prop("properties.tags", "equals", { propertyValue: "vip" }), ["ann", "bob"]],
      [prop("properties.tags", "notEquals", { propertyValue: "vip" }), ["cat", "dan", "eve"]],
      // [] and [null] hold no value, as in Elasticsearch.
      [prop("properties.tags", "exists"), ["ann", "bob"]],
      [prop("properties.tags", "missing"), ["cat", "dan", "eve"]],
      [prop("properties.tags", "in", { propertyValues: ["b2b", "zzz"] }), ["ann"]],
      [prop("properties.tags", "notIn", { propertyValues: ["b2b"] }), ["bob", "cat", "dan", "eve"]],
      [prop("properties.tags", "all", { propertyValues: ["vip", "b2b"] }), ["ann"]],
      [prop("properties.tags", "all", { propertyValues: ["vip"] }), ["ann", "bob"]],
      [prop("properties.tags", "hasSomeOf", { propertyValues: ["vip", "x"] }), ["ann", "bob"]],
      [prop("properties.tags", "hasNoneOf", { propertyValues: ["vip", "x"] }), [
        "cat",
        "dan",
        "eve",
      ]],
      [prop("properties.tags", "contains", { propertyValue: "2" }), ["ann"]],
      [prop("properties.codes", "equals", { propertyValueInteger: 2 }), ["ann", "cat"]],
      [prop("properties.codes", "hasSomeOf", { propertyValuesInteger: [2] }), ["ann", "cat"]],
      [prop("properties.codes", "all", { propertyValuesInteger: [1, 3] }), ["ann"]],
      [prop("properties.codes", "in", { propertyValuesDouble: [3, 4] }), ["ann"]],
      [prop("properties.codes", "greaterThan", { propertyValueInteger: 2 }), ["ann"]],
      [prop("properties.codes", "lessThan", { propertyValueInteger: 2 }), ["ann"]],
      // Text equality against numbers and booleans compares their JSON text, in arrays too.
      [prop("properties.codes", "equals", { propertyValue: "2" }), ["ann", "cat"]],
      [prop("properties.codes", "equals", { propertyValue: "2.0" }), []],
      [prop("properties.newsletter", "equals", { propertyValue: "true" }), ["ann"]],
      [prop("properties.weird", "equals", { propertyValue: '{"q"}' }), ["eve"]],
      [prop("properties.weird", "equals", { propertyValue: "a,b" }), ["eve"]],
      [prop("properties.tags", "equals", { propertyValue: '["vip", "b2b"]' }), []],
      [prop("properties.address.city", "equals", { propertyValue: "Paris" }), ["ann"]],
      [prop("properties.address", "equals", { propertyValue: "Paris" }), ["eve"]],
      [prop("properties.codes", "between", { propertyValuesInteger: [2, 2] }), ["ann", "cat"]],
      [prop("properties.codes", "between", { propertyValuesInteger: [4, 9] }), []],
      [prop("properties.codes", "between", { propertyValuesInteger: [3, 1] }), []],
      [prop("properties.codes", "greaterThanOrEqualTo", { propertyValueInteger: 3 }), ["ann"]],
      [prop("properties.codes", "lessThanOrEqualTo", { propertyValueInteger: 1 }), ["ann"]],
      [prop("properties.tags", "greaterThan", { propertyValue: "b2b" }), ["ann", "bob"]],
      [prop("properties.tags", "lessThan", { propertyValue: "c" }), ["ann"]],
      [prop("properties.tags", "between", { propertyValues: ["a", "c"] }), ["ann"]],
      // Arrays of dates: elements that are not dates are skipped.
      [prop("properties.visits", "equals", { propertyValueDate: "2026-11-20" }), ["ann"]],
      [prop("properties.visits", "isDay", { propertyValueDate: "2026-11-20" }), ["ann"]],
      [prop("properties.visits", "greaterThan", { propertyValueDate: "2026-11-20" }), []],
      [prop("properties.visits", "greaterThanOrEqualTo", { propertyValueDate: "2026-11-20" }), [
        "ann",
      ]],
      [prop("properties.visits", "lessThan", { propertyValueDate: "2026-11-20" }), []],
      [prop("properties.visits", "lessThanOrEqualTo", { propertyValueDate: "2026-11-20" }), [
        "ann",
      ]],
      [prop("properties.visits", "between", { propertyValuesDate: ["2026-11-19", "2026-11-20"] }), [
        "ann",
      ]],
      [prop("properties.visits", "in", { propertyValuesDate: ["2026-11-20T10:00:00Z"] }), ["ann"]],
      [prop("properties.codes", "hasNoneOf", { propertyValuesInteger: [1] }), [
        "bob",
        "cat",
        "dan",
        "eve",
      ]],
      // Case-sensitive substring, prefix, suffix; LIKE wildcards are plain characters.
      [prop("properties.email", "contains", { propertyValue: "example" }), ["ann", "cat", "eve"]],
      [prop("properties.email", "contains", { propertyValue: "EXAMPLE" }), ["bob"]],
      [prop("properties.email", "notContains", { propertyValue: "example" }), ["bob", "dan"]],
      [prop("properties.email", "contains", { propertyValue: "%_" }), ["eve"]],
      [prop("properties.email", "contains", { propertyValue: "_" }), ["eve"]],
      [prop("properties.email", "startsWith", { propertyValue: "eve%" }), ["eve"]],
      [prop("properties.email", "startsWith", { propertyValue: "%" }), []],
      [prop("properties.email", "endsWith", { propertyValue: ".org" }), ["cat"]],
      [prop("properties.email", "endsWith", { propertyValue: "example.com" }), ["ann", "eve"]],
      [prop("properties.email", "endsWith", { propertyValue: "_" }), []],
      [prop("properties.email", "inContains", { propertyValues: ["EXAMPLE", ".org"] }), [
        "bob",
        "cat",
      ]],
      // Anchored, like Lucene: the whole value must match.
      [prop("properties.email", "matchesRegex", { propertyValue: "[a-z]+@example\\.(com|org)" }), [
        "ann",
        "cat",
      ]],
      [prop("properties.email", "matchesRegex", { propertyValue: "example" }), []],
      [prop("properties.email", "matchesRegex", { propertyValue: ".*example.*" }), [
        "ann",
        "cat",
        "eve",
      ]],
      [prop("properties.firstName", "matchesRegex", { propertyValue: "\\w+" }), [
        "ann",
        "bob",
        "eve",
      ]],
    ]);
  });
});

Deno.test("compile: text equality on arrays: a string or boolean element by containment, a number by its text", async () => {
  const db = await freshDatabase();
  try {
    const { sql } = db;
    // Each value of `k` as JSON text: numbers keep their spelling in jsonb (2.0 stays 2.0).
    const docs: [string, string][] = [
      ["n20", "[2.0]"],
      ["n2", '[2, "y"]'],
      ["n1e2", "[1e2]"],
      ["bool", "[true]"],
      ["btext", '["true"]'],
      ["nested", '[["x"]]'],
      ["object", '[{"x": "x"}]'],
      ["brackets", '"[x]"'],
      ["mixed", '["x", 1]'],
      ["scalar", '"x"'],
      ["nulls", "[null]"],
      ["wrapped", '{"k": ["x"]}'],
    ];
    for (const [id, k] of docs) {
      await sql`
        insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
        values (${A}, ${id}, ${`{"shopDomain": ${JSON.stringify(A)}, "k": ${k}}`}::text::jsonb,
                'server', now(), now())`;
    }
    await expectProfiles(sql, [
      [prop("properties.k", "equals", { propertyValue: "2" }), ["n2"]],
      [prop("properties.k", "equals", { propertyValue: "2.0" }), ["n20"]],
      [prop("properties.k", "equals", { propertyValue: "100" }), ["n1e2"]],
      [prop("properties.k", "equals", { propertyValue: "true" }), ["bool", "btext"]],
      [prop("properties.k", "equals", { propertyValue: "x" }), ["mixed", "scalar"]],
      [prop("properties.k", "equals", { propertyValue: "y" }), ["n2"]],
      [prop("properties.k", "equals", { propertyValue: "[x]" }), ["brackets"]],
      [prop("properties.k", "equals", { propertyValue: '["x"]' }), []],
      [prop("properties.k", "notEquals", { propertyValue: "x" }), [
        "bool",
        "brackets",
        "btext",
        "n1e2",
        "n2",
        "n20",
        "nested",
        "nulls",
        "object",
        "wrapped",
      ]],
      [prop("properties.k.k", "equals", { propertyValue: "x" }), ["wrapped"]],
    ]);
  } finally {
    await db.close();
  }
});

Deno.test("compile: dates compare as timestamps over the span of their precision", async () => {
  await withSeeded(async (sql) => {
    await expectProfiles(sql, [
      [prop("properties.lastOrderAt", "isDay", { propertyValueDateExpr: "now" }), ["cat", "eve"]],
      [
        prop("properties.lastOrderAt", "isDay", { propertyValueDate: "2026-11-20T23:00:00-02:00" }),
        ["cat", "eve"],
      ],
      [prop("properties.lastOrderAt", "isDay", { propertyValueDate: "2026-11-20" }), ["ann"]],
      [prop("properties.lastOrderAt", "isNotDay", { propertyValueDateExpr: "now" }), [
        "ann",
        "bob",
        "dan",
      ]],
      [
        prop("properties.lastOrderAt", "greaterThanOrEqualTo", {
          propertyValueDateExpr: "now-1d/d",
        }),
        [
          "ann",
          "cat",
          "eve",
        ],
      ],
      // lessThanOrEqualTo a day includes the whole day; lessThan excludes it.
      [prop("properties.lastOrderAt", "lessThanOrEqualTo", { propertyValueDate: "2026-11-20" }), [
        "ann",
        "bob",
      ]],
      [prop("properties.lastOrderAt", "lessThan", { propertyValueDate: "2026-11-20" }), ["bob"]],
      [prop("properties.lastOrderAt", "greaterThan", { propertyValueDate: "2026-11-20" }), [
        "cat",
        "eve",
      ]],
      [prop("properties.lastOrderAt", "equals", { propertyValueDate: "2026-10-01" }), ["bob"]],
      [prop("properties.lastOrderAt", "equals", { propertyValueDate: "2026-11-21T00:00:00Z" }), [
        "eve",
      ]],
      [
        prop("properties.lastOrderAt", "greaterThan", {
          propertyValueDate: "2026-11-21T00:00:00.000Z",
        }),
        ["cat"],
      ],
      [prop("properties.lastOrderAt", "equals", { propertyValueDate: "2026-11-21T13:59+02:00" }), [
        "cat",
      ]],
      [
        prop("properties.lastOrderAt", "between", {
          propertyValuesDateExpr: ["now-1M/M", "now-1d/d"],
        }),
        [
          "ann",
          "bob",
        ],
      ],
      [prop("properties.lastOrderAt", "in", { propertyValuesDate: ["2026-10-01", "2026-11-20"] }), [
        "ann",
        "bob",
      ]],
      [prop("properties.lastOrderAt", "notIn", { propertyValuesDateExpr: ["now/d"] }), [
        "ann",
        "bob",
        "dan",
      ]],
      [prop("properties.birthday", "exists"), ["ann", "bob"]],
      [prop("properties.birthday", "lessThan", { propertyValueDateExpr: "now-18y" }), ["ann"]],
      [prop("properties.birthday", "notEquals", { propertyValueDate: "1990-05-17" }), [
        "bob",
        "cat",
        "dan",
        "eve",
      ]],
    ]);
    // cdp_try_timestamptz reads what the compiler reads, whatever the session's time zone.
    const inputs = [
      "2026-01-01",
      "2024-02-29",
      "2026-02-29",
      "2026-01-01T10:00",
      "2026-01-01t10:00:05.1234567z",
      "2026-01-01T10:00:05+02:00",
      "2026-01-01 10:00:05-0530",
      "2026-01-01T10:00:05+05",
      "0000-01-01",
      "9999-12-31T23:59:59.999999Z",
      "2026-13-01",
      "2026-01-01T24:00",
      "2026-01-01Z",
      "2026-01-01T10:00:60Z",
      "1767225600",
      "",
    ];
    const rows = await sql.begin(async (tx) => {
      await tx`set local timezone = 'America/New_York'`;
      return await tx<{ v: string; t: Date | null }[]>`
        select v, cdp_try_timestamptz(v) as t from unnest(${inputs}::text[]) with ordinality as x(v, n)
        order by n`;
    });
    assert.deepEqual(rows.map((r) => r.t?.toISOString() ?? null), [
      "2026-01-01T00:00:00.000Z",
      "2024-02-29T00:00:00.000Z",
      null,
      "2026-01-01T10:00:00.000Z",
      "2026-01-01T10:00:05.123Z",
      "2026-01-01T08:00:05.000Z",
      "2026-01-01T15:30:05.000Z",
      "2026-01-01T05:00:05.000Z",
      null,
      "9999-12-31T23:59:59.999Z",
      null,
      null,
      null,
      null,
      null,
      null,
    ]);
  });
});

Deno.test("compile: boolean nesting, not, matchAll", async () => {
  await withSeeded(async (sql) => {
    const some = and(
      prop("properties.firstName", "exists"),
      or(
        prop("properties.age", "greaterThan", { propertyValueInteger: 40 }),
        prop("properties.tags", "equals", { propertyValue: "vip" }),
      ),
    );
    await expectProfiles(sql, [
      [some, ["ann", "bob", "eve"]],
      [not(some), ["cat", "dan"]],
      [not(not(some)), ["ann", "bob", "eve"]],
      [matchAll, ["ann", "bob", "cat", "dan", "eve"]],
      [not(matchAll), []],
      [or(not(matchAll), prop("itemId", "equals", { propertyValue: "dan" })), ["dan"]],
      // not over a comparison on a missing property: exactly the complement.
      [not(prop("properties.age", "greaterThan", { propertyValueInteger: 40 })), [
        "ann",
        "bob",
        "dan",
      ]],
      [and(matchAll, matchAll, not(prop("properties.score", "exists"))), ["cat", "dan"]],
    ]);
  });
});

Deno.test("compile: pastEventCondition counts the profile's events, aliases included, in its scope", async () => {
  await withSeeded(async (sql) => {
    const orders = eventType("order_created");
    const views = eventType("page_viewed");
    const cases: [Condition, string[]][] = [
      // ann's orders: ev3 under her id, ev2 under her alias; dan's order is in scope B.
      [past(orders), ["ann", "cat"]],
      [past(and(orders, evProp("properties.total", "equals", { propertyValueInteger: 120 }))), [
        "ann",
      ]],
      [past(orders, { numberOfDays: 30 }), ["ann", "cat"]],
      [past(orders, { numberOfDays: 1 }), ["cat"]],
      [past(orders, { minimumEventCount: 2 }), ["ann"]],
      [past(views, { minimumEventCount: 2 }), ["bob"]],
      [past(views, { minimumEventCount: 2, maximumEventCount: 2 }), []],
      [past(views, { minimumEventCount: 2, maximumEventCount: 2, numberOfDays: 30 }), ["bob"]],
      [past(views, { maximumEventCount: 1 }), ["ann"]],
      [past(views, { minimumEventCount: 0, maximumEventCount: 0 }), ["cat", "dan", "eve"]],
      [past(views, { minimumEventCount: 0 }), ["ann", "bob", "cat", "dan", "eve"]],
      [past(views, { operator: "eventsNotOccurred" }), ["cat", "dan", "eve"]],
      [past(views, { operator: "eventsNotOccurred", numberOfDays: 1 }), [
        "ann",
        "cat",
        "dan",
        "eve",
      ]],
      // anon_x is cat's alias only in scope B.
      [past(eventType("refund_issued")), []],
      // fromDate/toDate are inclusive, to the end of toDate's precision.
      [past(orders, { fromDate: "2026-10-01", toDate: "2026-10-01" }), ["ann"]],
      [past(orders, { fromDate: "now-7d/d" }), ["ann", "cat"]],
      [past(orders, { toDate: "now-1d/d" }), ["ann"]],
      [past(orders, { fromDate: "2026-11-21", toDate: "now" }), ["cat"]],
      [past(orders, { fromDate: "2026-11-21T09:00:00Z", toDate: "2026-11-21T09:00:00Z" }), ["cat"]],
      // Event conditions: properties, nesting, types.
      [
        past(and(views, evProp("properties.url", "startsWith", { propertyValue: "https://acme" }))),
        ["ann"],
      ],
      [past(evProp("properties.total", "greaterThan", { propertyValueInteger: 50 })), ["ann"]],
      [past(evProp("properties.total", "equals", { propertyValue: "80" })), ["ann"]],
      [past(evProp("properties.total", "exists"), { minimumEventCount: 2 }), ["ann"]],
      [past(not(views)), ["ann", "cat"]],
      [past(matchAll, { minimumEventCount: 3 }), ["ann", "bob"]],
      [past(evProp("profileId", "equals", { propertyValue: "anon_ann" })), ["ann"]],
      [past(evProp("timeStamp", "isDay", { propertyValueDateExpr: "now" })), ["bob", "cat"]],
      [and(past(orders), prop("properties.age", "greaterThan", { propertyValueInteger: 40 })), [
        "cat",
      ]],
      [or(past(views, { numberOfDays: 1 }), not(past(matchAll))), ["bob", "dan", "eve"]],
    ];
    // Both plans, the scope-wide join and the per-profile probe, give the same answers.
    for (const single of [false, true]) {
      for (const [condition, expected] of cases) {
        assert.deepEqual(
          await profiles(sql, condition, { single }),
          expected,
          `${single ? "single" : "scope"}: ${JSON.stringify(condition)}`,
        );
      }
    }
    // The same id in scope B sees only scope B's events.
    assert.deepEqual(await profiles(sql, past(orders), { scope: B }), ["ann"]);
    assert.deepEqual(await profiles(sql, past(orders), { scope: B, single: true }), ["ann"]);
    assert.deepEqual(
      await profiles(
        sql,
        past(evProp("properties.total", "greaterThan", { propertyValueInteger: 100 })),
        { scope: B },
      ),
      ["ann"],
    );
  });
});

Deno.test("compile: event conditions over events", async () => {
  await withSeeded(async (sql) => {
    const cases: [Condition, string[]][] = [
      [eventType("order_created"), ["ev2", "ev3", "ev7"]],
      [evProp("eventType", "equals", { propertyValue: "page_viewed" }), [
        "ev1",
        "ev4",
        "ev5",
        "ev6",
      ]],
      [evProp("timeStamp", "greaterThanOrEqualTo", { propertyValueDateExpr: "now/d" }), [
        "ev4",
        "ev7",
        "ev8",
      ]],
      [evProp("timeStamp", "isDay", { propertyValueDate: "2026-11-20" }), ["ev1"]],
      [evProp("timeStamp", "lessThan", { propertyValueDateExpr: "now-1y" }), ["ev6"]],
      [evProp("profileId", "equals", { propertyValue: "anon_ann" }), ["ev2"]],
      [evProp("sessionId", "equals", { propertyValue: "s" }), [
        "ev1",
        "ev2",
        "ev3",
        "ev4",
        "ev5",
        "ev6",
        "ev7",
        "ev8",
      ]],
      [evProp("itemId", "in", { propertyValues: ["ev1", "ev4", "fv1"] }), ["ev1", "ev4"]],
      [evProp("properties.total", "exists"), ["ev2", "ev3", "ev7"]],
      [evProp("properties.total", "between", { propertyValuesInteger: [40, 120] }), ["ev2", "ev7"]],
      [evProp("properties.items", "equals", { propertyValue: "sku2" }), ["ev2"]],
      [evProp("properties.items", "all", { propertyValues: ["sku1", "sku2"] }), ["ev2"]],
      [evProp("properties.product.price", "lessThan", { propertyValueDouble: 20 }), ["ev1"]],
      [evProp("target.itemType", "equals", { propertyValue: "order" }), ["ev2"]],
      [evProp("target.itemId", "missing"), ["ev1", "ev3", "ev4", "ev5", "ev6", "ev7", "ev8"]],
      [evProp("flattenedProperties.channel", "equals", { propertyValue: "web" }), ["ev1"]],
      [
        and(eventType("page_viewed"), not(evProp("profileId", "equals", { propertyValue: "bob" }))),
        ["ev1"],
      ],
    ];
    for (const [condition, expected] of cases) {
      assert.deepEqual(await events(sql, condition), expected, JSON.stringify(condition));
    }
    assert.deepEqual(await events(sql, eventType("order_created"), B), ["fv1", "fv2"]);
  });
});

Deno.test("compile: another scope's rows never match, and the scope predicate selects the scope", async () => {
  await withSeeded(async (sql) => {
    const leaky = [
      prop("properties.firstName", "equals", { propertyValue: "Ann" }),
      prop("properties.tags", "equals", { propertyValue: "vip" }),
      prop("itemId", "equals", { propertyValue: "ann" }),
      matchAll,
      past(eventType("order_created")),
    ];
    for (const condition of leaky) {
      assert.deepEqual(await profiles(sql, condition, { scope: B }), ["ann"]);
      assert.ok(!(await profiles(sql, condition)).includes("zzz"));
    }
    assert.deepEqual(
      await profiles(sql, prop("properties.age", "equals", { propertyValueInteger: 34 }), {
        scope: B,
      }),
      [
        "ann",
      ],
    );
    // The injected predicate alone selects its scope, even without the caller's filter.
    const injected = injectScopePredicate(
      prop("properties.firstName", "equals", { propertyValue: "Ann" }),
      B,
    );
    const fragment = compileCondition(
      sql,
      parseCondition(injected, { itemType: "profile", allowScope: true, now: NOW }).tree,
      { itemType: "profile", scope: A },
    );
    const rows = await sql`select scope, item_id from profiles p where ${fragment}`;
    assert.deepEqual([...rows], [{ scope: B, item_id: "ann" }]);
    // A foreign predicate under the caller's scope filter matches nothing.
    assert.deepEqual(
      await profiles(sql, injectScopePredicate(matchAll, B), { allowScope: true }),
      [],
    );
    assert.deepEqual(await profiles(sql, scopePredicate(A), { allowScope: true }), [
      "ann",
      "bob",
      "cat",
      "dan",
      "eve",
    ]);
    assert.deepEqual(
      await profiles(sql, prop("scope", "equals", { propertyValue: A }), { allowScope: true }),
      [
        "ann",
        "bob",
        "cat",
        "dan",
        "eve",
      ],
    );
    // Without allowScope, the same trees are refused.
    await assert.rejects(() => profiles(sql, scopePredicate(A)), DomainError);
  });
});

Deno.test("compile: input never becomes SQL text; injection attempts are literal or refused", async () => {
  await withSeeded(async (sql) => {
    const attack = "x'); drop table profiles; --";
    assert.deepEqual(
      await profiles(sql, prop("properties.note", "equals", { propertyValue: attack })),
      ["ann"],
    );
    assert.deepEqual(
      await profiles(sql, prop("properties.note", "in", { propertyValues: [attack, "a"] })),
      ["ann"],
    );
    assert.deepEqual(
      await profiles(sql, prop("properties.note", "contains", { propertyValue: "'); drop" })),
      ["ann"],
    );
    assert.deepEqual(
      await profiles(
        sql,
        prop("properties.note", "matchesRegex", { propertyValue: "x'\\); drop .*" }),
      ),
      ["ann"],
    );
    // Arrays are bound whole: a comma, braces, quotes or the word NULL are just characters.
    await expectProfiles(sql, [
      [prop("properties.weird", "in", { propertyValues: ["NULL"] }), ["bob"]],
      [prop("properties.weird", "in", { propertyValues: ["a,b"] }), ["eve"]],
      [prop("properties.weird", "in", { propertyValues: ["a", "b"] }), []],
      [prop("properties.weird", "all", { propertyValues: ['{"q"}', "a,b"] }), ["eve"]],
      [prop("properties.weird", "inContains", { propertyValues: ['"q', "UL"] }), ["bob", "eve"]],
    ]);
    const name = "properties.a'); drop table profiles; --";
    assert.throws(() => parseCondition(prop(name, "exists"), { itemType: "profile" }), DomainError);
    // The compiler takes only parsed trees; parsing refuses these even with scope allowed.
    assert.throws(
      () => parseCondition(prop(name, "exists"), { itemType: "profile", allowScope: true }),
      (e: unknown) => e instanceof DomainError && toHttpError(e).code === "invalid_condition",
    );
    assert.throws(
      () =>
        parseCondition({ type: "sqlCondition", parameterValues: { sql: "true" } }, {
          itemType: "profile",
          allowScope: true,
        }),
      DomainError,
    );
    const [{ n }] = await sql`select count(*)::int as n from profiles` as unknown as [
      { n: number },
    ];
    assert.equal(n, 6);
    // The SQL text of a compiled tree holds none of the input: names and values are parameters.
    const marked = and(
      prop("properties.zqname.zqnested", "equals", { propertyValue: "zqvalue" }),
      prop("properties.zqlist", "in", { propertyValues: ["zqitem"] }),
      prop("properties.zqrx", "matchesRegex", { propertyValue: "zqpattern" }),
      prop("properties.zqdate", "lessThanOrEqualTo", { propertyValueDate: "1999-09-09" }),
      past(
        and(
          eventType("zqtype"),
          evProp("flattenedProperties.zqflat", "startsWith", { propertyValue: "zqprefix" }),
        ),
      ),
    );
    const fragment = compileCondition(
      sql,
      parseCondition(marked, { itemType: "profile", now: NOW }).tree,
      { itemType: "profile", scope: A },
    );
    const described = await sql`select item_id from profiles p where ${fragment}`.describe();
    assert.ok(!/zq|1999/.test(described.string), described.string);
    // A single key is read with ->, a path with #>: both bound as parameters.
    assert.ok(described.string.includes("p.properties -> $"), described.string);
    assert.ok(described.string.includes("p.properties #>> $"), described.string);
    // Text order does not depend on the server's default collation.
    const ordered = compileCondition(
      sql,
      parseCondition(prop("properties.a", "greaterThan", { propertyValue: "b" }), {
        itemType: "profile",
      }).tree,
      { itemType: "profile", scope: A },
    );
    assert.match(
      (await sql`select 1 from profiles p where ${ordered}`.describe()).string,
      /collate "C"/,
    );
  });
});

Deno.test("compile: every operator and value kind runs on every kind of property", async () => {
  await withSeeded(async (sql) => {
    const profileNames = [
      "properties.age",
      "properties.tags",
      "properties.lastOrderAt",
      "itemId",
      "properties.firstVisit",
      "properties.nbOfVisits",
    ];
    const eventNames = [
      "properties.total",
      "flattenedProperties.channel",
      "timeStamp",
      "eventType",
      "target.itemId",
    ];
    let ran = 0;
    for (const [itemType, names] of [["profile", profileNames], ["event", eventNames]] as const) {
      for (const name of names) {
        for (const [operator, keys] of Object.entries(OPERATOR_VALUES)) {
          for (const key of keys.length ? keys : [null]) {
            const values = key ? { [key]: SAMPLES[key] } : {};
            const condition = itemType === "profile"
              ? prop(name, operator, values)
              : evProp(name, operator, values);
            const checked = validateCondition(condition, { itemType, now: NOW });
            if (!checked.ok) continue; // a column refusing a kind
            const fragment = compileCondition(sql, checked.tree, { itemType, scope: A });
            if (itemType === "profile") {
              await sql`select count(*) from profiles p where ${fragment}`;
            } else await sql`select count(*) from events e where ${fragment}`;
            ran++;
          }
        }
      }
    }
    assert.ok(ran > 300, `ran ${ran}`);
    // Every pattern the validator accepts compiles on Postgres too.
    for (const pattern of ACCEPTED_PATTERNS) {
      await profiles(sql, prop("properties.email", "matchesRegex", { propertyValue: pattern }));
    }
  });
});

Deno.test("conditions: Unomi's value forms are accepted and stored in canonical form", () => {
  const raw = and(
    { type: "matchAllCondition" } as Condition,
    prop("properties.age", "between", { propertyValuesInteger: ["20", 30] }),
    prop("properties.score", "greaterThan", { propertyValueDouble: "-1.5e2" }),
    prop("properties.seen", "in", {
      propertyValuesDate: [1705314600000, "1705314600000", "2024-01-15T10:30:00Z"],
    }),
    prop("properties.seen", "lessThan", { propertyValueDateExpr: "1705314600000||+1d/d" }),
    past(eventType("view"), { fromDate: "1705314600000" }),
  );
  const result = validateCondition(raw, { itemType: "profile" });
  assert.ok(result.ok, JSON.stringify(result));
  const subs = result.condition.parameterValues.subConditions as Condition[];
  assert.deepEqual(subs[0], { type: "matchAllCondition", parameterValues: {} });
  assert.deepEqual(subs[1]!.parameterValues.propertyValuesInteger, [20, 30]);
  assert.equal(subs[2]!.parameterValues.propertyValueDouble, -150);
  assert.deepEqual(subs[3]!.parameterValues.propertyValuesDate, [
    "2024-01-15T10:30:00.000Z",
    "1705314600000",
    "2024-01-15T10:30:00Z",
  ]);
  assert.equal(subs[4]!.parameterValues.propertyValueDateExpr, "1705314600000||+1d/d");
  // The input is never changed.
  assert.deepEqual((raw.parameterValues.subConditions as Condition[])[0], {
    type: "matchAllCondition",
  });
});

Deno.test("conditions: absent parameterValues name each missing parameter; sessionPropertyCondition's fields", () => {
  assert.deepEqual(paths(issues({ type: "profilePropertyCondition" })), [
    "$.parameterValues.propertyName",
    "$.parameterValues.comparisonOperator",
  ]);
  const session = (name: string) => ({
    type: "sessionPropertyCondition",
    parameterValues: { propertyName: name, comparisonOperator: "exists" },
  });
  for (
    const name of [
      "itemId",
      "profileId",
      "timeStamp",
      "lastEventDate",
      "size",
      "duration",
      "properties.referringURL",
      "properties.utm.source",
    ]
  ) {
    assertValid(session(name));
    assertValid(session(name), "event");
    assertValid(past(session(name)));
  }
  for (
    const [name, message] of [
      ["properties.a-b", /properties.<name> takes up to 5 dot-separated segments/],
      ["profile.properties.age", /a session's profile is not addressable/],
      ["systemProperties.x", /systemProperties are out of scope/],
      ["scope", /must not reference scope/],
      ["firstEventAt", /unknown session field/],
    ]
  ) {
    const found = issues(session(name as string));
    assert.deepEqual(paths(found), ["$.parameterValues.propertyName"], name as string);
    assert.match(found[0]!.message, message as RegExp);
  }
  // A session's duration is a number, its timeStamp a date.
  assert.deepEqual(
    paths(issues({
      type: "sessionPropertyCondition",
      parameterValues: {
        propertyName: "duration",
        comparisonOperator: "equals",
        propertyValueDate: "2026-01-01",
      },
    })),
    ["$.parameterValues.propertyValueDate"],
  );
});

Deno.test("compile: dates are limited to years 1 to 9999 after their offset and date math, and every one validated runs", async () => {
  // Each passed validation before and then failed on PostgreSQL (22008/22009, a 502), or passes
  // now and runs.
  const refused = [
    ["propertyValueDate", "9999-12-31T23:00:00-05:00"],
    ["propertyValueDate", "0001-01-01T00:00:00+01:00"],
    ["propertyValueDateExpr", "9999-12-31T23:00:00-05:00"],
    ["propertyValueDateExpr", "9999-12-31||+1d"],
    ["propertyValueDateExpr", "0001-01-01||-1ms"],
    ["propertyValueDateExpr", "0001-01-01T00:30:00+01:00||+1m"],
    ["propertyValueDate", "253402300800000"],
  ];
  for (const [key, value] of refused) {
    const found = issues(prop("properties.lastOrderAt", "equals", { [key!]: value }));
    assert.deepEqual(paths(found), [`$.parameterValues.${key}`], value);
    assert.match(found[0]!.message, /years 1 to 9999/, value);
  }
  await withSeeded(async (sql) => {
    const accepted: [string, string, string][] = [
      ["equals", "propertyValueDate", "9999-12-31"],
      ["lessThanOrEqualTo", "propertyValueDate", "9999-12-31"],
      ["greaterThan", "propertyValueDate", "9999-12-31"],
      ["isDay", "propertyValueDate", "9999-12-31T23:59:59Z"],
      ["isNotDay", "propertyValueDate", "253402300799999"],
      ["equals", "propertyValueDateExpr", "9999-12-31||/d"],
      ["lessThanOrEqualTo", "propertyValueDateExpr", "9999-12-30||+1d/y"],
      ["greaterThanOrEqualTo", "propertyValueDate", "0001-01-01"],
      ["lessThan", "propertyValueDate", "0001-01-01T01:00:00+01:00"],
      ["equals", "propertyValueDateExpr", "0001-01-02||-1d"],
    ];
    for (const [operator, key, value] of accepted) {
      for (const name of ["properties.lastOrderAt", "properties.firstVisit"]) {
        await profiles(sql, prop(name, operator, { [key]: value }));
        await profiles(sql, prop(name, operator, { [key]: value }), { single: true });
      }
    }
    // In lists and pairs too, and as a pastEventCondition's window.
    for (const name of ["properties.lastOrderAt", "properties.firstVisit"]) {
      for (const operator of ["in", "all", "notIn", "between"]) {
        await profiles(
          sql,
          prop(name, operator, { propertyValuesDate: ["0001-01-01", "9999-12-31"] }),
        );
      }
    }
    await profiles(
      sql,
      past(eventType("order_created"), { fromDate: "0001-01-01", toDate: "9999-12-31" }),
    );
  });
});
