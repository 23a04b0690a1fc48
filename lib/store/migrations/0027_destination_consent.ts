/**
 * Migration 27, "destination_consent".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 27 of the schema. */
export const destinationConsent = {
  version: 27,
  name: "destination_consent",
  sql: `
      -- The consent type a destination requires (lib/audiences/delivery.ts): only the changes of
      -- profiles with it granted are delivered. Null: none required.
      alter table destinations add column required_consent text;
    `,
};
