/**
 * The operator CLI (`deno task admin`): the command registry, finding a command in argv, its
 * help, and running it: against the stores the environment names, or against a running service's
 * operator API when ADMIN_URL is set (remote.ts). See docs/operations.md.
 *
 * @module
 */
import { loadConfig } from "../config.ts";
import { openRuntime, type Runtime } from "../runtime/runtime.ts";
import { COMMANDS } from "./command_table.ts";
import { type Command, type CommandIo, type Commands, UsageError } from "./command.ts";
import { withProgress } from "./progress.ts";
import { RemoteError, runRemote } from "./remote.ts";

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
  let runtime: Runtime | undefined;
  try {
    const input = command.parse(args);
    const config = loadConfig(env);
    const io = _localIo(progress);
    let output: unknown;
    if (config.adminUrl === undefined) {
      runtime = await openRuntime(config, {
        serve: false,
        migrate: command.beforeMigrations !== true,
      });
      // The queue INGEST_QUEUE names: a command's job (`shop sync --background`) lands there.
      output = await command.run(runtime, input, config, io);
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
    await runtime?.close();
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
