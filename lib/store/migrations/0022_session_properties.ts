/**
 * Migration 22, "session_properties".
 *
 * Once applied, a migration is never edited: its SQL text, indentation included, stays
 * byte-identical; a change is a new migration.
 *
 * @module
 */

/** Version 22 of the schema. */
export const sessionProperties = {
  version: 22,
  name: "session_properties",
  sql: `
      -- A session's properties (Apache Unomi's session property names: referringURL,
      -- userAgentName, deviceCategory, ...), derived from the context of its earliest event that
      -- carries one (lib/engine/session_context.ts); context_at is that event's time, so an
      -- earlier event with a context, arriving late, replaces them and a later one never does.
      alter table sessions
        add column properties jsonb not null default '{}'::jsonb,
        add column context_at timestamptz;
    `,
};
