import assert from "node:assert/strict";
import { importUnomiSegments } from "../../../lib/engine/segment_import.ts";
import { getSegment, segmentMembers, segmentView } from "../../../lib/engine/segments.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { freshDatabase } from "../../test_support.ts";

const SCOPE = "acme.myshopify.com";
const NOW = new Date("2026-11-21T12:00:00Z");

/** Apache Unomi 2.7's segment example (manual/src/main/asciidoc/datamodel.adoc:636-674). */
const AGE_20_30 = {
  itemId: "age_20_30",
  itemType: "segment",
  condition: {
    parameterValues: {
      subConditions: [
        {
          parameterValues: {
            propertyName: "properties.age",
            comparisonOperator: "greaterThanOrEqualTo",
            propertyValueInteger: 20,
          },
          type: "profilePropertyCondition",
        },
        {
          parameterValues: {
            propertyName: "properties.age",
            comparisonOperator: "lessThan",
            propertyValueInteger: 30,
          },
          type: "profilePropertyCondition",
        },
      ],
      operator: "and",
    },
    type: "booleanCondition",
  },
  metadata: {
    id: "age_20_30",
    name: "age_20_30",
    description: null,
    scope: "digitall",
    tags: [],
    enabled: true,
    missingPlugins: false,
    hidden: false,
    readOnly: false,
  },
};

/** The manual's REST example (datamodel.adoc:687-716). */
const LEADS = {
  metadata: {
    id: "leads",
    name: "Leads",
    scope: "systemscope",
    description: "You can customize the list below by editing the leads segment.",
    readOnly: true,
  },
  condition: {
    type: "booleanCondition",
    parameterValues: {
      operator: "and",
      subConditions: [{
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.leadAssignedTo",
          comparisonOperator: "exists",
        },
      }],
    },
  },
};

async function withDatabase(fn: (sql: Sql) => Promise<void>): Promise<void> {
  const db = await freshDatabase();
  try {
    await db.sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      values (${SCOPE}, 'p20', '{"age": 20}', 'server', now(), now()),
             (${SCOPE}, 'p35', '{"age": 35, "leadAssignedTo": "ann"}', 'server', now(), now())`;
    await fn(db.sql);
  } finally {
    await db.close();
  }
}

const members = async (sql: Sql, id: string) => {
  const segment = await getSegment(sql, SCOPE, id);
  assert.ok(segment, id);
  const page = await segmentMembers(sql, segment, { limit: 10, offset: 0, now: NOW });
  return page.list.map((p) => p.itemId);
};

Deno.test("segment import: Unomi definitions are created under the brand's scope (Unomi's scope ignored)", async () => {
  await withDatabase(async (sql) => {
    const result = await importUnomiSegments(sql, {
      scope: SCOPE,
      definitions: [AGE_20_30, LEADS],
      now: NOW,
    });
    assert.deepEqual(result, {
      scope: SCOPE,
      created: 2,
      updated: 0,
      refused: 0,
      segments: [
        { index: 0, unomiId: "age_20_30", id: `seg__${SCOPE}__age_20_30`, status: "created" },
        { index: 1, unomiId: "leads", id: `seg__${SCOPE}__leads`, status: "created" },
      ],
    });
    const leads = await getSegment(sql, SCOPE, `seg__${SCOPE}__leads`);
    assert.equal(leads!.name, "Leads");
    assert.equal(leads!.description, LEADS.metadata.description);
    // Stored under the brand's scope, shown with its predicate, never Unomi's "systemscope".
    assert.deepEqual(leads!.condition, LEADS.condition);
    assert.deepEqual(segmentView(leads!).condition, {
      type: "booleanCondition",
      parameterValues: {
        operator: "and",
        subConditions: [
          {
            type: "profilePropertyCondition",
            parameterValues: {
              propertyName: "properties.shopDomain",
              comparisonOperator: "equals",
              propertyValue: SCOPE,
            },
          },
          LEADS.condition,
        ],
      },
    });
    assert.deepEqual(await members(sql, `seg__${SCOPE}__age_20_30`), ["p20"]);
    assert.deepEqual(await members(sql, `seg__${SCOPE}__leads`), ["p35"]);
  });
});

Deno.test("segment import: a known id is updated; one object works; bad ones are refused with reasons", async () => {
  await withDatabase(async (sql) => {
    await importUnomiSegments(sql, { scope: SCOPE, definitions: AGE_20_30, now: NOW });
    const wider = structuredClone(AGE_20_30);
    wider.metadata.name = "Twenties and thirties";
    wider.condition.parameterValues.subConditions[1]!.parameterValues.propertyValueInteger = 40;
    const result = await importUnomiSegments(sql, {
      scope: SCOPE,
      definitions: [
        wider,
        { metadata: { name: "no id" }, condition: { type: "matchAllCondition" } },
        {
          metadata: { id: "nested" },
          condition: { type: "nestedCondition", parameterValues: { path: "properties.x" } },
        },
        {
          metadata: { id: "scope_only" },
          condition: {
            type: "profilePropertyCondition",
            parameterValues: {
              propertyName: "properties.shopDomain",
              comparisonOperator: "equals",
              propertyValue: "other.myshopify.com",
            },
          },
        },
        "not a segment",
        { metadata: { id: "all" } },
      ],
      now: NOW,
    });
    assert.deepEqual(
      result.segments.map((s) => [s.status, s.unomiId]),
      [
        ["updated", "age_20_30"],
        ["refused", null],
        ["refused", "nested"],
        ["refused", "scope_only"],
        ["refused", null],
        ["refused", "all"],
      ],
    );
    assert.deepEqual([result.created, result.updated, result.refused], [0, 1, 5]);
    const reasons = result.segments.map((s) => s.status === "refused" ? s.reasons : []);
    assert.deepEqual(reasons[1], ["$[1].metadata.id: is required (a non-empty string)"]);
    assert.match(reasons[2]![0]!, /\$\[2\]\.condition\.type: nestedCondition is out of scope/);
    assert.match(
      reasons[3]![0]!,
      /\$\[3\]\.condition: .*empty once the scope predicate is removed/,
    );
    assert.deepEqual(reasons[4], ["$[4]: must be a Unomi segment object"]);
    assert.match(reasons[5]![0]!, /\$\[5\]\.condition: condition must be an object/);
    const updated = await getSegment(sql, SCOPE, `seg__${SCOPE}__age_20_30`);
    assert.equal(updated!.name, "Twenties and thirties");
    assert.deepEqual(await members(sql, `seg__${SCOPE}__age_20_30`), ["p20", "p35"]);
    // Nothing was stored for the refused ones.
    const [count] = await sql<{ n: number }[]>`select count(*)::int as n from segments`;
    assert.equal(count!.n, 1);
  });
});
