import assert from "node:assert/strict";
import { embeddedSocketPath, openDatabase } from "../../lib/db.ts";

Deno.test("embedded: the serving owner shares its database with a second opener", async () => {
  const dataDir = await Deno.makeTempDir();
  const owner = await openDatabase({ dataDir, serve: true });
  try {
    assert.equal(owner.mode, "embedded-owner");
    const client = await openDatabase({ dataDir, serve: false });
    try {
      assert.equal(client.mode, "embedded-client");
      await client.sql`create table shared (v text)`;
      await client.sql`insert into shared values ('from the client')`;
      assert.deepEqual([...await owner.sql`select v from shared`], [{ v: "from the client" }]);
    } finally {
      await client.close();
    }
  } finally {
    await owner.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("embedded: a non-serving owner (a CLI command) makes others wait, then hands over", async () => {
  const dataDir = await Deno.makeTempDir();
  const cli = await openDatabase({ dataDir, serve: false });
  try {
    assert.equal(cli.mode, "embedded-owner");
    await cli.sql`create table t (v int)`;
    await cli.sql`insert into t values (1)`;
    await assert.rejects(
      openDatabase({ dataDir, serve: true, waitMs: 300 }),
      /held by another process/,
    );
  } finally {
    await cli.close();
  }
  const next = await openDatabase({ dataDir, serve: true });
  try {
    assert.equal(next.mode, "embedded-owner");
    assert.deepEqual([...await next.sql`select v from t`], [{ v: 1 }]);
  } finally {
    await next.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("embedded: an owner killed with SIGKILL releases the database; data survives", async () => {
  const dataDir = await Deno.makeTempDir();
  const script = `
    import { openDatabase } from ${
    JSON.stringify(new URL("../../lib/db.ts", import.meta.url).href)
  };
    const db = await openDatabase({ dataDir: ${JSON.stringify(dataDir)}, serve: true });
    await db.sql\`create table survived (v text)\`;
    await db.sql\`insert into survived values ('committed before the crash')\`;
    console.log("ready");
    await new Promise(() => {});
  `;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", script],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  while (!seen.includes("ready")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`child exited early: ${seen}`);
    seen += value;
  }
  child.kill("SIGKILL");
  await child.status;
  await reader.cancel();

  const db = await openDatabase({ dataDir, serve: true, waitMs: 10_000 });
  try {
    assert.equal(db.mode, "embedded-owner");
    assert.deepEqual([...await db.sql`select v from survived`], [{
      v: "committed before the crash",
    }]);
  } finally {
    await db.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("embedded: socket paths stay under the Unix limit", () => {
  assert.equal(embeddedSocketPath("/srv/data"), "/srv/data/pg.sock");
  const long = `/srv/${"x".repeat(150)}`;
  const path = embeddedSocketPath(long);
  assert.match(path, /^\/tmp\/cdp-[0-9a-f]+\.sock$/);
  assert.equal(embeddedSocketPath(long), path);
  assert.notEqual(embeddedSocketPath(long, "pg.42.sock"), path);
});
