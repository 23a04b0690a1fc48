/**
 * Migration 15, "contacts_statement_brand_check".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 15 of the schema. */
export const contactsStatementBrandCheck = {
  version: 15,
  name: "contacts_statement_brand_check",
  sql: `
      -- A contact's brand is checked once per statement for all its rows, as migration 13 does
      -- for orders, instead of by a foreign-key trigger per row (a fifth of the insert time of a
      -- batch of new contacts, on an import's serial path). As the key did, the check locks the
      -- brand's row for key share, so the brand cannot be deleted before the contacts commit.
      alter table contacts drop constraint contacts_brand_id_fkey;

      create function contacts_check_brand() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' then
          if exists (select from new_rows n join old_rows o on o.id = n.id
                     where n.brand_id <> o.brand_id) then
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
      create trigger contacts_brand_on_insert after insert on contacts
        referencing new table as new_rows
        for each statement execute function contacts_check_brand();
      create trigger contacts_brand_on_update after update on contacts
        referencing old table as old_rows new table as new_rows
        for each statement execute function contacts_check_brand();

      -- What "on delete cascade" did: a deleted brand's contacts go with it, after its orders.
      create or replace function brands_delete_orders() returns trigger language plpgsql as $$
      begin
        delete from orders o using old_rows d where o.brand_id = d.id;
        delete from contacts c using old_rows d where c.brand_id = d.id;
        return null;
      end $$;
    `,
};
