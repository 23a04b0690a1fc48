import assert from "node:assert/strict";
import { conditionCost, MAX_CONDITION_PATTERNS } from "../../../../lib/engine/conditions.ts";

const regex = (pattern: string) => ({
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.email",
    comparisonOperator: "matchesRegex",
    propertyValue: pattern,
  },
});

Deno.test("conditionCost: counts matchesRegex patterns, probes of events and sessions, and nodes", () => {
  const tree = {
    type: "booleanCondition",
    parameterValues: {
      operator: "and",
      subConditions: [
        regex("a.*"),
        { type: "notCondition", parameterValues: { subCondition: regex("b.*") } },
        {
          type: "pastEventCondition",
          parameterValues: {
            eventCondition: {
              type: "eventPropertyCondition",
              parameterValues: {
                propertyName: "properties.url",
                comparisonOperator: "matchesRegex",
                propertyValue: "https://.*",
              },
            },
          },
        },
        {
          type: "sessionPropertyCondition",
          parameterValues: { propertyName: "size", comparisonOperator: "exists" },
        },
        {
          type: "profilePropertyCondition",
          parameterValues: {
            propertyName: "properties.email",
            comparisonOperator: "contains",
            propertyValue: "@",
          },
        },
      ],
    },
  };
  assert.deepEqual(conditionCost(tree), { patterns: 3, probes: 2, nodes: 8 });
});

Deno.test("conditionCost: anything that is not a condition counts as nothing", () => {
  assert.deepEqual(conditionCost(null), { patterns: 0, probes: 0, nodes: 0 });
  assert.deepEqual(conditionCost({ type: "booleanCondition" }), {
    patterns: 0,
    probes: 0,
    nodes: 0,
  });
  // An inherited key is not a parameter.
  const sneaky = JSON.parse('{"type":"booleanCondition","parameterValues":{"__proto__":{}}}');
  assert.deepEqual(conditionCost(sneaky), { patterns: 0, probes: 0, nodes: 1 });
  assert.equal(MAX_CONDITION_PATTERNS, 20);
});
