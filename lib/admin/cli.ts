/**
 * The operator CLI (`deno task admin`): the command registry, finding a command in argv, its
 * help, and running it: against the stores the environment names, or against a running service's
 * operator API when ADMIN_URL is set (remote.ts). See docs/operations.md.
 *
 * @module
 */
import { loadConfig } from "../config.ts";
import { ulidSource } from "../ids.ts";
import { createOutbox } from "../ingest/outbox.ts";
import { openStores, type Stores } from "../store/stores.ts";
import { appCommands } from "./app_commands.ts";
import { brandCommands } from "./brand_commands.ts";
import { type Command, type CommandIo, type Commands, UsageError } from "./command.ts";
import { deadLetterCommands } from "./deadletter_commands.ts";
import { importCommands } from "./import_commands.ts";
import { insightsCommands } from "./insights_commands.ts";
import { segmentCommands } from "./segment_commands.ts";
import { withProgress } from "./progress.ts";
import { RemoteError, runRemote } from "./remote.ts";
import { schemaCommands } from "./schema_commands.ts";
import { shopCommands } from "./shop_commands.ts";

/** Every command, by name; `help` lists them in this order. */
export const COMMANDS: Commands = {
  ...brandCommands,
  ...importCommands,
  ...segmentCommands,
  ...shopCommands,
  ...insightsCommands,
  ...deadLetterCommands,
  ...schemaCommands,
  ...appCommands,
};

/** Options every command takes, besides its own. */
const _GLOBAL_OPTIONS = `  --help       print the command's usage and exit
  --progress   report objects read and their rate on stderr while a FILE is read
               (on by default when stderr is a terminal)`;

/** The usage text: every command's synopsis. */
export function usageText(commands: Commands = COMMANDS): string {
  const lines = Object.entries(commands)
    .map(([name, command]) => `  ${name} ${command.usage}`.trimEnd());
  return `Usage: deno task admin <command> [--help]

${lines.join("\n")}

Each success prints one JSON object on stdout and exits 0; a failure prints a
message on stderr and exits non-zero (2 for a usage error). With ADMIN_URL and
ADMIN_TOKEN set, commands run on that service instead (docs/operations.md).`;
}

/** One command's help: its synopsis, what it does, and the options every command takes. */
export function commandHelp(name: string, command: Command<unknown>): string {
  return `Usage: deno task admin ${name} ${command.usage}`.trimEnd() +
    `\n\n${command.summary}\n\n${_GLOBAL_OPTIONS}`;
}

/** The command argv names (two words, or one) and the arguments after its name; null if none. */
export function findCommand(
  argv: string[],
  commands: Commands = COMMANDS,
): { name: string; command: Command<unknown>; args: string[] } | null {
  for (const words of [2, 1]) {
    const name = argv.slice(0, words).join(" ");
    const command = argv.length >= words ? commands[name] : undefined;
    if (command) return { name, command, args: argv.slice(words) };
  }
  return null;
}

/** Runs one operator command (locally, or remotely with ADMIN_URL); returns the exit code. */
export async function runAdmin(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  const progress = argv.includes("--progress") || Deno.stderr.isTerminal();
  argv = argv.filter((arg) => arg !== "--progress");
  const asksHelp = argv[0] === "help" || argv[0] === "--help" || argv[0] === "-h";
  const found = findCommand(asksHelp ? argv.slice(1) : argv);
  if (!found) {
    if (argv.length === 0 || (asksHelp && argv.length === 1)) {
      console.log(usageText());
      return 0;
    }
    console.error(`error: unknown command: ${argv.join(" ")}\n\n${usageText()}`);
    return 2;
  }
  const { name, command, args } = found;
  if (asksHelp || args.includes("--help") || args.includes("-h")) {
    console.log(commandHelp(name, command));
    return 0;
  }
  let stores: Stores | undefined;
  try {
    const input = command.parse(args);
    const config = loadConfig(env);
    const io = _localIo(progress);
    let output: unknown;
    if (config.adminUrl === undefined) {
      stores = await openStores(config, {
        serve: false,
        migrate: command.beforeMigrations !== true,
      });
      // Where the queue is an outbox, a command's enqueue (`shop sync --background`) lands there.
      const kv = config.ingestQueue === "outbox"
        ? createOutbox(stores.kv, { newId: ulidSource() }).kv
        : stores.kv;
      output = await command.run({ ...stores, kv }, input, config, io);
    } else {
      output = await runRemote(
        { url: config.adminUrl, token: config.adminToken },
        { name, args, file: command.input?.(input) },
        io,
      );
    }
    console.log(JSON.stringify(output));
    return 0;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof UsageError || (err instanceof RemoteError && err.usage)) {
      console.error(
        `error: ${message}\nusage: deno task admin ${name} ${command.usage} (--help for more)`,
      );
      return 2;
    }
    console.error(`error: ${message}`);
    return 1;
  } finally {
    await stores?.close();
  }
}

const _encoder = new TextEncoder();

/** Files from this machine (`-` is stdin), with progress on stderr when asked for. */
function _localIo(progress: boolean): CommandIo {
  return {
    async open(path) {
      const stream = path === "-" ? Deno.stdin.readable : (await Deno.open(path)).readable;
      if (!progress) return stream;
      return withProgress(stream, {
        write: (text) => void Deno.stderr.writeSync(_encoder.encode(text)),
        terminal: Deno.stderr.isTerminal(),
      });
    },
  };
}
