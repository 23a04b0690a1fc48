/**
 * Migration 11, "order_line_items_in_orders".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 11 of the schema. */
export const orderLineItemsInOrders = {
  version: 11,
  name: "order_line_items_in_orders",
  sql: `
      -- An order's line items are written and read with the order, never alone: kept on its row
      -- as a JSON array (price as exact 2-decimal text), an order costs one row, one set of index
      -- entries and no per-item foreign-key check to write (README: "The synced store").
      alter table orders add column line_items jsonb not null default '[]';
      update orders o set line_items = i.items
      from (
        select order_id,
               jsonb_agg(jsonb_build_object(
                 'title', title, 'quantity', quantity, 'price', price::text, 'sku', sku,
                 'product_id', product_id, 'variant_id', variant_id,
                 'variant_title', variant_title) order by position) as items
        from order_line_items group by order_id
      ) i
      where o.id = i.order_id;
      drop table order_line_items;
    `,
};
