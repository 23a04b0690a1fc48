/** dev.ts, the runner of `deno task dev`: restarts on a change, ends on SIGTERM as on Ctrl-C. */
import assert from "node:assert/strict";
import { eventually } from "./test_support.ts";

const DEV = new URL("../dev.ts", import.meta.url).pathname;
const WATCHED_FILE = new URL("../lib/log.ts", import.meta.url).pathname;

// A stand-in for the service that shuts down on SIGTERM as main.ts does: a signal listener,
// some work, then Deno.exit.
const SERVICE = `
  const server = Deno.serve({ port: 0, onListen: ({ port }) => console.log("port " + port) },
    () => new Response("ok"));
  Deno.addSignalListener("SIGTERM", async () => {
    await server.shutdown();
    console.log("stopped");
    Deno.exit(0);
  });
`;

function spawnDev() {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-run", DEV, "eval", SERVICE],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let output = "";
  const reading = child.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (chunk) => void (output += chunk) }),
  );
  const errors = child.stderr.pipeTo(new WritableStream());
  return { child, output: () => output, done: Promise.all([reading, errors]) };
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.test(`dev: ${signal} ends the service and the runner, with the service's status`, async () => {
    const dev = spawnDev();
    await eventually(() => /port \d+/.test(dev.output()));
    const port = Number(dev.output().match(/port (\d+)/)![1]);
    dev.child.kill(signal);
    const status = await dev.child.status;
    await dev.done;
    assert.equal(status.code, 0);
    assert.match(dev.output(), /stopped/);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/`), "the service no longer listens");
  });
}

Deno.test("dev: a change to a source file restarts the service", async () => {
  const dev = spawnDev();
  try {
    await eventually(() => /port \d+/.test(dev.output()));
    const { mtime } = await Deno.stat(WATCHED_FILE);
    // Touched, not edited: the file's content is left as it is.
    await Deno.utime(WATCHED_FILE, new Date(), new Date());
    await eventually(() => (dev.output().match(/port \d+/g) ?? []).length === 2);
    assert.equal((dev.output().match(/stopped/g) ?? []).length, 1);
    if (mtime) await Deno.utime(WATCHED_FILE, new Date(), mtime);
  } finally {
    dev.child.kill("SIGTERM");
    await dev.child.status;
    await dev.done;
  }
});
