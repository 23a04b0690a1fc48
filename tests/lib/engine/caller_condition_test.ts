import assert from "node:assert/strict";
import { MAX_CONDITION_PATTERNS, scopePredicate } from "../../../lib/engine/conditions.ts";
import { DomainError } from "../../../lib/errors.ts";
import {
  queryCondition,
  scopedCondition,
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

Deno.test("scopedCondition: strips any scope predicate and injects the scope's own", () => {
  const foreign = {
    type: "booleanCondition",
    parameterValues: { operator: "and", subConditions: [FOREIGN_SCOPE, HAS_EMAIL] },
  };
  const expected = {
    type: "booleanCondition",
    parameterValues: { operator: "and", subConditions: [scopePredicate(A), HAS_EMAIL] },
  };
  assert.deepEqual(scopedCondition(foreign, A), expected);
  assert.deepEqual(scopedCondition(HAS_EMAIL, A), expected);
  for (const raw of [null, "x", [HAS_EMAIL], scopePredicate(B)]) {
    assert.throws(() => scopedCondition(raw, A), isStatus(400), JSON.stringify(raw));
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

Deno.test("storedCondition: the stored form is read back as the caller's tree, at its stored paths", () => {
  const stored = scopedCondition(HAS_EMAIL, A);
  assert.deepEqual(
    storedCondition(stored, A, NOW).tree,
    queryCondition(HAS_EMAIL, "profile", NOW),
  );
  // Any other shape (another brand's predicate, or no predicate) is evaluated whole.
  assert.equal(storedCondition(stored, B, NOW).tree.type, "and");
  assert.equal(storedCondition(HAS_EMAIL, A, NOW).tree.type, "property");
  // A stored date that has left the window names its path in the stored JSON.
  const late = scopedCondition({
    type: "profilePropertyCondition",
    parameterValues: {
      propertyName: "properties.renewal",
      comparisonOperator: "lessThan",
      propertyValueDateExpr: "now+1y",
    },
  }, A);
  assert.throws(
    () => storedCondition(late, A, new Date("9999-06-01T00:00:00Z")),
    (err: unknown) =>
      err instanceof DomainError && err.kind === "invalid_condition" &&
      err.message.includes(
        "$.parameterValues.subConditions[1].parameterValues.propertyValueDateExpr",
      ),
  );
});

Deno.test("queryCondition: a caller's scope reference is refused, not stripped", () => {
  assert.throws(
    () => queryCondition(FOREIGN_SCOPE, "profile", NOW),
    isStatus(400, "invalid_condition"),
  );
});

Deno.test("scopedCondition, queryCondition: at most MAX_CONDITION_PATTERNS matchesRegex patterns", () => {
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
  const scope = "acme.myshopify.com";
  assert.ok(scopedCondition(patterns(MAX_CONDITION_PATTERNS), scope));
  assert.ok(queryCondition(patterns(MAX_CONDITION_PATTERNS), "profile", NOW));
  for (
    const prepare of [
      () => scopedCondition(patterns(MAX_CONDITION_PATTERNS + 1), scope),
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
