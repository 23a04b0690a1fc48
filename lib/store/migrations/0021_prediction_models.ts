/**
 * Migration 21, "prediction_models".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 21 of the schema. */
export const predictionModels = {
  version: 21,
  name: "prediction_models",
  sql: `
      -- The model of each brand's last ready fit (lib/commerce/predictions: the selected purchase
      -- model, both models' and Gamma-Gamma's parameters), read with a customer's completed order
      -- days in the one statement her insights' predictions take. The whole fit (validation,
      -- distribution) is kept in Deno KV for GET /cdp/insights/predictions. Replaced in the
      -- transaction that replaces the brand's profile_predictions; a fit that is not ready
      -- deletes it.
      create table prediction_models (
        brand_id text primary key references brands (id) on delete cascade,
        model jsonb not null,
        fitted_at timestamptz not null
      );
    `,
};
