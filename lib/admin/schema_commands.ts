/**
 * The operator command that applies the schema's migrations (docs/operations.md#migrations).
 *
 * @module
 */
import { migrate, MIGRATIONS } from "../store/migrations.ts";
import { type Commands, defineCommand, parseFlags } from "./command.ts";

/** `migrate`. */
export const schemaCommands: Commands = {
  "migrate": defineCommand({
    usage: ``,
    summary: "Applies the migrations the database lacks, under the migration lock, and " +
      "prints them (none when it is current).",
    beforeMigrations: true,
    parse(args) {
      parseFlags(args, {});
      return {};
    },
    async run(stores) {
      const applied = new Set(await migrate(stores.sql));
      return {
        applied: MIGRATIONS.filter((m) => applied.has(m.version))
          .map((m) => ({ version: m.version, name: m.name })),
        version: MIGRATIONS.at(-1)?.version ?? 0,
      };
    },
  }),
};
