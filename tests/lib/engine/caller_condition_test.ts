import assert from "node:assert/strict";
import { MAX_CONDITION_PATTERNS, scopePredicate } from "../../../lib/engine/conditions.ts";
import { DomainError } from "../../../lib/errors.ts";
import { queryCondition, scopedCondition } from "../../../lib/engine/caller_condition.ts";
import { toHttpError } from "../../../lib/http/errors.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";

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

Deno.test("queryCondition: absent covers the scope; profiles get the scope predicate", () => {
  assert.deepEqual(queryCondition(undefined, "profile", A), scopePredicate(A));
  assert.equal(queryCondition(undefined, "event", A), null);
  assert.deepEqual(queryCondition(HAS_EMAIL, "profile", A), {
    type: "booleanCondition",
    parameterValues: { operator: "and", subConditions: [scopePredicate(A), HAS_EMAIL] },
  });
  const event = {
    type: "eventTypeCondition",
    parameterValues: { eventTypeId: "view" },
  };
  assert.deepEqual(queryCondition(event, "event", A), event);
});

Deno.test("queryCondition: a caller's scope reference is refused, not stripped", () => {
  assert.throws(
    () => queryCondition(FOREIGN_SCOPE, "profile", A),
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
  assert.ok(queryCondition(patterns(MAX_CONDITION_PATTERNS), "profile", scope));
  for (
    const prepare of [
      () => scopedCondition(patterns(MAX_CONDITION_PATTERNS + 1), scope),
      () => queryCondition(patterns(MAX_CONDITION_PATTERNS + 1), "profile", scope),
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
