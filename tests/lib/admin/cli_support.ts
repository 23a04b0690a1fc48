/** Running the operator CLI and the service as subprocesses, for the CLI's tests. */
import assert from "node:assert/strict";
import { DATABASE_URL, freshDatabase } from "../../test_support.ts";

/** The repository's root. */
export const ROOT = new URL("../../../", import.meta.url).pathname;

/** What a CLI run left: its exit code and output. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `deno task admin <args>` as a subprocess with exactly `env`, `stdin` piped in if given. */
export async function runCli(
  args: string[],
  env: Record<string, string>,
  stdin?: string,
): Promise<CliResult> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", `${ROOT}admin.ts`, ...args],
    env,
    cwd: ROOT,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const output = await child.output();
  return {
    code: output.code,
    stdout: new TextDecoder().decode(output.stdout),
    stderr: new TextDecoder().decode(output.stderr),
  };
}

/** One JSON object on stdout, nothing else. */
export function json(result: CliResult): Record<string, unknown> {
  assert.equal(result.code, 0, result.stderr);
  const lines = result.stdout.trim().split("\n");
  assert.equal(lines.length, 1, result.stdout);
  return JSON.parse(lines[0]!);
}

/** Environment pointing the CLI (and service) at throwaway stores of this run's backend. */
export async function withStores(
  fn: (env: Record<string, string>) => Promise<void>,
): Promise<void> {
  const dataDir = await Deno.makeTempDir();
  const database = DATABASE_URL ? await freshDatabase() : undefined;
  try {
    await fn({ DATA_DIR: dataDir, DATABASE_URL: database?.url ?? "" });
  } finally {
    await database?.close();
    await Deno.remove(dataDir, { recursive: true });
  }
}

/** Runs `fn` with the URL of the service (main.ts) started on `env`; stops it after. */
export async function withService(
  env: Record<string, string>,
  fn: (url: string) => Promise<void>,
): Promise<void> {
  const service = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", `${ROOT}main.ts`],
    env: { ...env, PORT: "0" },
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = service.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    let seen = "";
    while (!seen.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`service exited: ${seen}`);
      seen += value;
    }
    await fn(JSON.parse(seen.split("\n")[0]!).url as string);
  } finally {
    service.kill("SIGTERM");
    assert.equal((await service.status).code, 0);
    await reader.cancel();
  }
}
