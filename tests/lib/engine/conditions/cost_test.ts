import assert from "node:assert/strict";
import {
  conditionCost,
  MAX_CONDITION_PATTERNS,
  parseCondition,
} from "../../../../lib/engine/conditions.ts";

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
  const parsed = parseCondition(tree, { itemType: "profile" });
  assert.deepEqual(conditionCost(parsed.tree), { patterns: 3, probes: 2, nodes: 8 });
  // Parsing counts it once, for the caps and the evaluation order.
  assert.deepEqual(parsed.cost, { patterns: 3, probes: 2, nodes: 8 });
});

Deno.test("conditionCost: a single node counts one; the cap on patterns is 20", () => {
  const parsed = parseCondition(regex("a.*"), { itemType: "profile" });
  assert.deepEqual(parsed.cost, { patterns: 1, probes: 0, nodes: 1 });
  const all = parseCondition({ type: "matchAllCondition" }, { itemType: "profile" });
  assert.deepEqual(all.cost, { patterns: 0, probes: 0, nodes: 1 });
  assert.equal(MAX_CONDITION_PATTERNS, 20);
});
