/**
 * Migration 13, "orders_statement_reference_checks".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 13 of the schema. */
export const ordersStatementReferenceChecks = {
  version: 13,
  name: "orders_statement_reference_checks",
  sql: `
      -- An order's brand and contact are checked once per statement for all its rows, instead of
      -- by a foreign-key trigger per row (a third of an import's insert time). The rules are the
      -- foreign keys' and one more: the contact belongs to the order's brand.
      alter table orders drop constraint orders_brand_id_fkey;
      alter table orders drop constraint orders_contact_id_fkey;

      -- Lock (3084, hash of the brand): shared by every statement writing orders that name
      -- contacts, exclusive once a statement has deleted contacts of the brand. So a contact
      -- cannot be deleted between the check of an order naming it and that order's commit: the
      -- delete's unlinking waits for the order's transaction and then sees the order.
      create function orders_check_references() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' then
          if exists (select from new_rows n join old_rows o on o.id = n.id
                     where n.brand_id <> o.brand_id) then
            raise foreign_key_violation using message = 'an order cannot move to another brand';
          end if;
        elsif exists (select from new_rows n where not exists (
                        select from brands b where b.id = n.brand_id)) then
          raise foreign_key_violation using message = 'an order names a brand that does not exist';
        end if;
        perform pg_advisory_xact_lock_shared(3084, hashtext(r.brand_id))
        from (select distinct brand_id from new_rows where contact_id is not null) r
        order by r.brand_id;
        if exists (select from new_rows n where n.contact_id is not null and not exists (
                     select from contacts c where c.id = n.contact_id and c.brand_id = n.brand_id))
        then
          raise foreign_key_violation
            using message = 'an order names a contact that does not exist in its brand';
        end if;
        return null;
      end $$;
      create trigger orders_references_on_insert after insert on orders
        referencing new table as new_rows
        for each statement execute function orders_check_references();
      create trigger orders_references_on_update after update on orders
        referencing old table as old_rows new table as new_rows
        for each statement execute function orders_check_references();

      -- What "on delete set null" did: a deleted contact's orders keep no link to it.
      create function contacts_unlink_orders() returns trigger language plpgsql as $$
      begin
        perform pg_advisory_xact_lock(3084, hashtext(r.brand_id))
        from (select distinct brand_id from old_rows) r order by r.brand_id;
        update orders o set contact_id = null from old_rows d where o.contact_id = d.id;
        return null;
      end $$;
      create trigger contacts_unlink_orders after delete on contacts
        referencing old table as old_rows
        for each statement execute function contacts_unlink_orders();

      -- What "on delete cascade" did: a deleted brand's orders go with it.
      create function brands_delete_orders() returns trigger language plpgsql as $$
      begin
        delete from orders o using old_rows d where o.brand_id = d.id;
        return null;
      end $$;
      create trigger brands_delete_orders after delete on brands
        referencing old table as old_rows
        for each statement execute function brands_delete_orders();
    `,
};
