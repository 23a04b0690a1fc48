/**
 * Migration 10, "profile_fillfactor".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical (tests/fixtures/migrations_v17.json); a change is a new migration.
 *
 * @module
 */

/** Version 10 of the schema. */
export const profileFillfactor = {
  version: 10,
  name: "profile_fillfactor",
  sql: `
      -- Every applied batch rewrites its profiles' visit fields and its sessions' spans, columns
      -- no index covers: free room on each page lets those updates stay on the page (HOT) instead
      -- of adding an entry to every index of the table.
      alter table profiles set (fillfactor = 70);
      alter table sessions set (fillfactor = 70);
    `,
};
