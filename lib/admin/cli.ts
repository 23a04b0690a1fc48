/**
 * The operator CLI (`deno task admin`): finds the command, checks its arguments, opens the
 * stores and prints the command's JSON (docs/operations.md).
 *
 * @module
 */
import { loadConfig } from "../config.ts";
import { openStores, type Stores } from "../store/stores.ts";
import { appCommands } from "./app_commands.ts";
import { brandCommands } from "./brand_commands.ts";
import { type Commands, UsageError } from "./command.ts";
import { deadLetterCommands } from "./deadletter_commands.ts";
import { importCommands } from "./import_commands.ts";

/** Every command, by name; `help` lists them in this order. */
export const COMMANDS: Commands = {
  ...brandCommands,
  ...importCommands,
  ...deadLetterCommands,
  ...appCommands,
};

/** The usage text: every command's synopsis. */
export function usageText(): string {
  const lines = Object.entries(COMMANDS).map(([name, command]) => `  ${name} ${command.usage}`);
  return `Usage: deno task admin <command>

${lines.join("\n")}

Each success prints one JSON object on stdout and exits 0; a failure prints a
message on stderr and exits non-zero (2 for a usage error).`;
}

/** Runs one operator command against the stores `env` names; returns the process exit code. */
export async function runAdmin(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  const name = argv.slice(0, 2).join(" ");
  const command = COMMANDS[name] ?? COMMANDS[argv[0] ?? ""];
  const args = COMMANDS[name] ? argv.slice(2) : argv.slice(1);
  if (!command) {
    if (argv.length === 0 || argv[0] === "help" || argv[0] === "--help") {
      console.log(usageText());
      return 0;
    }
    console.error(`error: unknown command: ${argv.join(" ")}\n\n${usageText()}`);
    return 2;
  }
  let stores: Stores | undefined;
  try {
    const input = command.parse(args);
    const config = loadConfig(env);
    stores = await openStores(config, { serve: false });
    console.log(JSON.stringify(await command.run(stores, input, config)));
    return 0;
  } catch (err) {
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    return err instanceof UsageError ? 2 : 1;
  } finally {
    await stores?.close();
  }
}
