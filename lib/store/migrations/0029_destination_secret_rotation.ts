/**
 * Migration 29, "destination_secret_rotation".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 29 of the schema. */
export const destinationSecretRotation = {
  version: 29,
  name: "destination_secret_rotation",
  sql: `
      -- A rotated signing secret (lib/audiences/destinations.ts) keeps signing beside the new one
      -- until previous_secret_expires_at, so a receiver switches without refusing a delivery.
      -- Sealed like \`secret\`.
      alter table destinations add column previous_secret text;
      alter table destinations add column previous_secret_expires_at timestamptz;
    `,
};
