/**
 * Migration 19, "profile_predictions".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 19 of the schema. */
export const profilePredictions = {
  version: 19,
  name: "profile_predictions",
  sql: `
      -- Each profile's predictions from its brand's last fit (lib/commerce/predictions), read by
      -- conditions (predictions.*) and segment exports. Replaced wholesale per scope at each fit;
      -- values are stored as the customer insights show them (rounded), so a segment and the
      -- insights agree. Erasing or merging away a profile takes its row with it.
      create table profile_predictions (
        scope text not null,
        profile_id text not null,
        p_alive numeric not null,
        expected_orders_90d numeric not null,
        expected_orders_365d numeric not null,
        predicted_clv_365d numeric(20, 2) not null,
        expected_next_order_at timestamptz,
        model text not null check (model in ('bgnbd', 'mbgnbd')),
        fitted_at timestamptz not null,
        primary key (scope, profile_id),
        foreign key (scope, profile_id) references profiles (scope, item_id) on delete cascade
      );
    `,
};
