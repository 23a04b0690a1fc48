/**
 * Migration 14, "insight_generation_stripes".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 14 of the schema. */
export const insightGenerationStripes = {
  version: 14,
  name: "insight_generation_stripes",
  sql: `
      -- A brand's generation is the sum of its stripes; each writing connection bumps its own
      -- (lib/commerce/summaries.ts), so concurrent writers of one brand (an import's two) no
      -- longer wait for each other's commit on one counter row.
      alter table insight_generations add column stripe smallint not null default 0;
      alter table insight_generations drop constraint insight_generations_pkey;
      alter table insight_generations add primary key (brand_id, stripe);
    `,
};
