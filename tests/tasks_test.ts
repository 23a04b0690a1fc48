/**
 * deno.json's tasks: `.env` is read when present, and its absence prints no warning (the tasks
 * pass `--env-file=.env` only when the file exists).
 */
import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);
// What the admin task needs to run, linked into a directory of its own with no .env.
const _LINKED = ["deno.json", "deno.lock", "admin.ts", "main.ts", "lib", "routes", "vendor"];

async function withCopy(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    for (const name of _LINKED) {
      await Deno.symlink(new URL(name, ROOT).pathname, `${dir}/${name}`);
    }
    // Deno prints a one-time notice in a new checkout (npm packages with build scripts that it
    // ignores, from the test-only SDKs in deno.lock): the first task takes it, the test the rest.
    await task(dir, "admin", "help");
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function task(dir: string, ...args: string[]) {
  const env: Record<string, string> = { ...Deno.env.toObject(), NO_COLOR: "1" };
  // The variables the test's .env sets must come from the file, not from this process.
  delete env.LOG_LEVEL;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["task", ...args],
    cwd: dir,
    env,
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  // Besides the line deno task echoes (the command).
  const stderr = decoder.decode(out.stderr).split("\n").filter((line) => !line.startsWith("Task "));
  return { code: out.code, stdout: decoder.decode(out.stdout), stderr: stderr.join("\n") };
}

Deno.test("tasks: without .env the admin task prints no warning", async () => {
  await withCopy(async (dir) => {
    const run = await task(dir, "admin", "help");
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /brand create/);
    assert.doesNotMatch(run.stderr, /warning|\.env|not found/i);
  });
});

Deno.test("tasks: a .env present sets the environment of the task", async () => {
  await withCopy(async (dir) => {
    // An invalid value the configuration refuses by name: proof the file was read.
    await Deno.writeTextFile(`${dir}/.env`, "LOG_LEVEL=chatty\n");
    const run = await task(dir, "admin", "brand", "list");
    assert.equal(run.code, 1, run.stdout + run.stderr);
    assert.match(run.stdout + run.stderr, /LOG_LEVEL/);
    assert.doesNotMatch(run.stderr, /warning/i);
  });
});
