/**
 * The operator command table: every command of the CLI (`deno task admin`) by name. Kept apart
 * from the CLI's runner (cli.ts) so that the service's entry hands the same table to the operator
 * API (routes/admin.ts) without the HTTP composition importing the CLI.
 *
 * @module
 */
import { appCommands } from "./app_commands.ts";
import { brandCommands } from "./brand_commands.ts";
import type { Commands } from "./command.ts";
import { deadLetterCommands } from "./deadletter_commands.ts";
import { destinationCommands } from "./destination_commands.ts";
import { importCommands } from "./import_commands.ts";
import { insightsCommands } from "./insights_commands.ts";
import { rejectedCommands } from "./rejected_commands.ts";
import { pixelCommands } from "./pixel_commands.ts";
import { privacyCommands } from "./privacy_commands.ts";
import { schemaCommands } from "./schema_commands.ts";
import { segmentCommands } from "./segment_commands.ts";
import { shopCommands } from "./shop_commands.ts";

/** Every command, by name; `help` lists them in this order. */
export const COMMANDS: Commands = {
  ...brandCommands,
  ...importCommands,
  ...segmentCommands,
  ...shopCommands,
  ...insightsCommands,
  ...privacyCommands,
  ...deadLetterCommands,
  ...rejectedCommands,
  ...destinationCommands,
  ...schemaCommands,
  ...appCommands,
  ...pixelCommands,
};
