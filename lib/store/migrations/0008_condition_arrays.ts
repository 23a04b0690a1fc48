/**
 * Migration 8, "condition_arrays".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 8 of the schema. */
export const conditionArrays = {
  version: 8,
  name: "condition_arrays",
  sql: `
      -- The scalar elements of a jsonb array as a typed array, for the condition compiler's array
      -- branch (value op ANY(...), range @> ANY(...), &&, @>). A function call rather than a
      -- correlated subquery keeps the whole scan parallel safe; the body's subquery keeps it
      -- from being inlined. Called only on arrays.
      create function cdp_texts(value jsonb) returns text[]
      language sql immutable strict parallel safe as $fn$
        select array(select x #>> '{}' from jsonb_array_elements(value) as t(x)
                     where jsonb_typeof(x) in ('string', 'number', 'boolean'))
      $fn$;
      create function cdp_numbers(value jsonb) returns numeric[]
      language sql immutable strict parallel safe as $fn$
        select array(select x::numeric from jsonb_array_elements(value) as t(x)
                     where jsonb_typeof(x) = 'number')
      $fn$;
      create function cdp_timestamps(value jsonb) returns timestamptz[]
      language sql immutable strict parallel safe as $fn$
        select array(select v from jsonb_array_elements(value) as t(x),
                       cdp_try_timestamptz(x #>> '{}') as v
                     where jsonb_typeof(x) in ('string', 'number', 'boolean') and v is not null)
      $fn$;
    `,
};
