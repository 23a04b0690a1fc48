/**
 * Migration 17, "contacts_brand_check_hash_join".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 17 of the schema. */
export const contactsBrandCheckHashJoin = {
  version: 17,
  name: "contacts_brand_check_hash_join",
  sql: `
      -- Version 15's "exists" over the old and new rows was planned for a fast first row: a
      -- nested loop over two unindexed transition tables, quadratic in the rows updated. An
      -- aggregate reads every pair anyway, so the planner joins them on the id by hash.
      create or replace function contacts_check_brand() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' then
          if (select bool_or(n.brand_id <> o.brand_id)
              from new_rows n join old_rows o on o.id = n.id) then
            raise foreign_key_violation using message = 'a contact cannot move to another brand';
          end if;
        end if;
        perform from brands b where b.id in (select brand_id from new_rows)
        order by b.id for key share;
        if exists (select from new_rows n where not exists (
                     select from brands b where b.id = n.brand_id)) then
          raise foreign_key_violation using message = 'a contact names a brand that does not exist';
        end if;
        return null;
      end $$;
    `,
};
