/**
 * What the fault tests share besides the private PostgreSQL: the service and the operator CLI
 * run as processes of their own, and a named wait.
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

/** The service (`main.ts`) running in a process of its own, its output kept for a failure. */
export interface ServiceProcess {
  child: Deno.ChildProcess;
  log(): string;
  done: Promise<unknown>;
}

/** Starts `main.ts` with `env` in a process of its own. */
export function spawnService(env: Record<string, string>): ServiceProcess {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--unstable-kv", "main.ts"],
    cwd: ROOT,
    env,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let log = "";
  const done = Promise.all(
    [child.stdout, child.stderr].map((stream) =>
      stream.pipeThrough(new TextDecoderStream()).pipeTo(
        new WritableStream({ write: (chunk) => void (log += chunk) }),
      )
    ),
  );
  return { child, log: () => log, done };
}

/** Kills the service with SIGKILL (a crash, not a shutdown) and waits for its end. */
export async function killService(service: ServiceProcess): Promise<void> {
  try {
    service.child.kill("SIGKILL");
  } catch { /* already gone */ }
  await service.child.status;
  await service.done.catch(() => {});
}

/** A JSON request to the service with the brand's key. */
export type ServiceApi = (path: string, init?: RequestInit) => Promise<Response>;

/**
 * Creates a brand on `shop` and a key for it with the operator CLI, then waits until the service
 * at `base` answers `/healthz`; answers the brand's API caller.
 */
export async function brandApi(
  env: Record<string, string>,
  base: string,
  brand: { name: string; shop: string },
): Promise<ServiceApi> {
  const created = await adminCli(env, [
    "brand",
    "create",
    "--name",
    brand.name,
    "--shop",
    brand.shop,
  ]);
  const { key } = await adminCli(env, ["key", "issue", "--brand", String(created.id)]);
  const api: ServiceApi = (path, init = {}) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      signal: AbortSignal.timeout(10_000),
    });
  await eventuallyNamed("the service is healthy", async () => {
    try {
      return (await api("/healthz").then((r) => (r.body?.cancel(), r.status))) === 200;
    } catch {
      return false;
    }
  });
  return api;
}
