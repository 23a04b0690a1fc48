import assert from "node:assert/strict";
import { MAX_CONDITION_PATTERNS, scopePredicate } from "../../../lib/engine/conditions.ts";
import { DomainError } from "../../../lib/errors.ts";
import {
  queryCondition,
  segmentCondition,
  storedCondition,
} from "../../../lib/engine/caller_condition.ts";
import { toHttpError } from "../../../lib/http/errors.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";
const NOW = new Date("2026-03-01T12:00:00Z");

const HAS_EMAIL = {
  type: "profilePropertyCondition",
  parameterValues: { propertyName: "properties.email", comparisonOperator: "exists" },
};
const FOREIGN_SCOPE = {
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.shopDomain",
    comparisonOperator: "equals",
    propertyValue: B,
  },
};

function isStatus(status: number, code?: string) {
  return (err: unknown) => {
    const http = toHttpError(err);
    return http.status === status && (code === undefined || http.code === code);
  };
}

Deno.test("segmentCondition: strips any scope predicate; the caller's tree is what is stored", () => {
  const foreign = {
    type: "booleanCondition",
    parameterValues: { operator: "and", subConditions: [FOREIGN_SCOPE, HAS_EMAIL] },
  };
  assert.deepEqual(segmentCondition(foreign), HAS_EMAIL);
  assert.deepEqual(segmentCondition(HAS_EMAIL), HAS_EMAIL);
  for (const raw of [null, "x", [HAS_EMAIL], scopePredicate(B)]) {
    assert.throws(() => segmentCondition(raw), isStatus(400), JSON.stringify(raw));
  }
});

Deno.test("queryCondition: absent is null (the whole scope); a tree is parsed, never scope-injected", () => {
  assert.equal(queryCondition(undefined, "profile", NOW), null);
  assert.equal(queryCondition(undefined, "event", NOW), null);
  // The enclosing query filters on the scope: the tree evaluated is the caller's own.
  assert.deepEqual(queryCondition(HAS_EMAIL, "profile", NOW), {
    type: "property",
    session: false,
    source: { kind: "json", root: "p.properties", path: ["email"] },
    test: { op: "exists" },
    negated: false,
  });
  const event = {
    type: "eventTypeCondition",
    parameterValues: { eventTypeId: "view" },
  };
  assert.deepEqual(queryCondition(event, "event", NOW), { type: "eventType", eventTypeId: "view" });
  // Date math is resolved at the request's now.
  const recent = {
    type: "profilePropertyCondition",
    parameterValues: {
      propertyName: "properties.lastOrder",
      comparisonOperator: "greaterThan",
      propertyValueDateExpr: "now-1d",
    },
  };
  const parsed = queryCondition(recent, "profile", NOW);
  assert.ok(parsed?.type === "property" && parsed.test.op === "gt");
  assert.deepEqual((parsed.test as { value: unknown }).value, {
    type: "timestamptz",
    lo: NOW.getTime() - 86_400_000,
    hi: NOW.getTime() - 86_400_000 + 1,
  });
});

Deno.test("storedCondition: the stored tree is evaluated as the caller's, at its stored paths", () => {
  const stored = segmentCondition(HAS_EMAIL);
  assert.deepEqual(storedCondition(stored, NOW).tree, queryCondition(HAS_EMAIL, "profile", NOW));
  // A row stored before the scope lived in its column alone may hold a scope predicate: it
  // reads the scope column, which the enclosing query filters on.
  const older = {
    type: "booleanCondition",
    parameterValues: { operator: "and", subConditions: [scopePredicate(A), HAS_EMAIL] },
  };
  const tree = storedCondition(older, NOW).tree;
  assert.ok(tree.type === "and");
  assert.deepEqual(tree.subConditions[0], {
    type: "property",
    session: false,
    source: { kind: "text", column: "p.scope" },
    test: { op: "eq", value: { type: "text", value: A } },
    negated: false,
  });
  // A stored date that has left the window names its path in the stored JSON.
  const late = segmentCondition({
    type: "profilePropertyCondition",
    parameterValues: {
      propertyName: "properties.renewal",
      comparisonOperator: "lessThan",
      propertyValueDateExpr: "now+1y",
    },
  });
  assert.throws(
    () => storedCondition(late, new Date("9999-06-01T00:00:00Z")),
    (err: unknown) =>
      err instanceof DomainError && err.kind === "invalid_condition" &&
      err.message.includes("$.parameterValues.propertyValueDateExpr"),
  );
});

Deno.test("queryCondition: a caller's scope reference is refused, not stripped", () => {
  assert.throws(
    () => queryCondition(FOREIGN_SCOPE, "profile", NOW),
    isStatus(400, "invalid_condition"),
  );
});

Deno.test("segmentCondition, queryCondition: at most MAX_CONDITION_PATTERNS matchesRegex patterns", () => {
  const patterns = (n: number) => ({
    type: "booleanCondition",
    parameterValues: {
      operator: "or",
      subConditions: Array.from({ length: n }, (_, i) => ({
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.email",
          comparisonOperator: "matchesRegex",
          propertyValue: `p${i}@.*`,
        },
      })),
    },
  });
  assert.ok(segmentCondition(patterns(MAX_CONDITION_PATTERNS)));
  assert.ok(queryCondition(patterns(MAX_CONDITION_PATTERNS), "profile", NOW));
  for (
    const prepare of [
      () => segmentCondition(patterns(MAX_CONDITION_PATTERNS + 1)),
      () => queryCondition(patterns(MAX_CONDITION_PATTERNS + 1), "profile", NOW),
    ]
  ) {
    assert.throws(
      prepare,
      (err: unknown) =>
        err instanceof DomainError && err.kind === "invalid_condition" &&
        err.message.includes(`has ${MAX_CONDITION_PATTERNS + 1} matchesRegex patterns`) &&
        err.message.includes("MAX_CONDITION_PATTERNS"),
    );
  }
});
