/** Runs the operator CLI as a subprocess, exactly as `deno task admin` does, over throwaway stores. */
import assert from "node:assert/strict";
import { DATABASE_URL, freshDatabase } from "../../test_support.ts";

/** The repository root. */
export const ROOT = new URL("../../../", import.meta.url).pathname;

/** What a CLI run printed and its exit code. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `deno task admin ARGS` with `env`. */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", `${ROOT}admin.ts`, ...args],
    env,
    cwd: ROOT,
  }).output();
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
