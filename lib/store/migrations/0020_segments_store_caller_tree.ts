/**
 * Migration 20, "segments_store_caller_tree".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 20 of the schema. */
export const segmentsStoreCallerTree = {
  version: 20,
  name: "segments_store_caller_tree",
  sql: `
      -- A segment stores the caller's condition tree alone; its scope is the row's scope column,
      -- and the API puts the scope predicate back in front of the tree when it shows it. A row
      -- stored as and(<its scope's predicate>, tree), exactly as the code before this wrote it,
      -- keeps just the tree, byte for byte (json's operators return the stored text), so GET
      -- shows what it showed. A row of any other shape is left as it is.
      update segments
      set condition = condition -> 'parameterValues' -> 'subConditions' -> 1
      where condition::text =
        '{"type":"booleanCondition","parameterValues":{"operator":"and","subConditions":[' ||
        '{"type":"profilePropertyCondition","parameterValues":{"propertyName":' ||
        '"properties.shopDomain","comparisonOperator":"equals","propertyValue":' ||
        to_json(scope)::text || '}},' ||
        (condition -> 'parameterValues' -> 'subConditions' -> 1)::text || ']}}';
    `,
};
