/**
 * What the fault tests share besides the private PostgreSQL: the operator CLI run as a process
 * of its own, and a named wait.
 *
 * @module
 */
import assert from "node:assert/strict";

/** The repository's root: where the service's and the CLI's entry points are. */
export const ROOT = new URL("../../", import.meta.url).pathname;

/** Runs `deno task admin` ARGS in a process of its own with `env`; answers its JSON. */
export async function adminCli(
  env: Record<string, string>,
  args: string[],
): Promise<Record<string, unknown>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", "admin.ts", ...args],
    cwd: ROOT,
    env,
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** Waits until `check` holds, failing after `timeoutMs` with `what` in the message. */
export async function eventuallyNamed(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
