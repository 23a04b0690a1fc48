import { PGlite } from "@electric-sql/pglite";
import assert from "node:assert/strict";
import postgres from "postgres";
import { startPgliteServer } from "../../../lib/store/pglite_server.ts";

async function withServer(fn: (path: string, pglite: PGlite) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  const pglite = await PGlite.create();
  const server = await startPgliteServer(pglite, `${dir}/pg.sock`);
  try {
    await fn(`${dir}/pg.sock`, pglite);
  } finally {
    await server.close();
    await pglite.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function connect(path: string, max = 4) {
  return postgres({ path, max, onnotice: () => {} });
}

Deno.test("pglite server: many connections' prepared statements never interleave", async () => {
  await withServer(async (path) => {
    const clients = [connect(path), connect(path), connect(path)];
    try {
      const answers = await Promise.all(
        Array.from(
          { length: 300 },
          (_, i) =>
            clients[i % 3]!`select ${i}::int as n, repeat('x', ${i % 50}) as pad`.then((rows) =>
              rows[0]!.n
            ),
        ),
      );
      assert.deepEqual(answers, Array.from({ length: 300 }, (_, i) => i));
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });
});

Deno.test("pglite server: another connection's statement never lands inside a transaction", async () => {
  await withServer(async (path) => {
    const a = connect(path, 1);
    const b = connect(path, 1);
    try {
      await a`create table t (v text)`;
      let release!: () => void;
      const paused = new Promise<void>((resolve) => (release = resolve));
      const rolledBack = a.begin(async (tx) => {
        await tx`insert into t values ('inside a')`;
        await paused;
        throw new Error("roll back");
      }).catch(() => {});
      // b's insert waits for a's transaction to end, then commits on its own.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const outside = b`insert into t values ('from b')`;
      release();
      await rolledBack;
      await outside;
      assert.deepEqual([...await b`select v from t`], [{ v: "from b" }]);
    } finally {
      await a.end();
      await b.end();
    }
  });
});

Deno.test("pglite server: a client that vanishes mid-transaction is rolled back", async () => {
  await withServer(async (path) => {
    const other = connect(path, 1);
    try {
      await other`create table t (v text)`;
      const raw = connect(path, 1);
      const reserved = await raw.reserve();
      await reserved`begin`;
      await reserved`insert into t values ('never committed')`;
      // Destroy the connection without ending the transaction.
      await raw.end({ timeout: 0 });
      assert.deepEqual([...await other`select count(*)::int as n from t`], [{ n: 0 }]);
      await other`insert into t values ('after')`;
      assert.deepEqual([...await other`select v from t`], [{ v: "after" }]);
    } finally {
      await other.end();
    }
  });
});

Deno.test("pglite server: SSL negotiation is answered 'N' (no TLS on a local socket)", async () => {
  await withServer(async (path) => {
    const conn = await Deno.connect({ transport: "unix", path });
    try {
      const request = new Uint8Array(8);
      new DataView(request.buffer).setInt32(0, 8);
      new DataView(request.buffer).setInt32(4, 80877103);
      await conn.write(request);
      const answer = new Uint8Array(1);
      assert.equal(await conn.read(answer), 1);
      assert.equal(String.fromCharCode(answer[0]!), "N");
    } finally {
      conn.close();
    }
  });
});

Deno.test("pglite server: results far larger than a socket buffer arrive intact", async () => {
  await withServer(async (path) => {
    const sql = connect(path, 1);
    try {
      const rows = await sql`
        select i, repeat(chr(65 + i % 26), 100) as pad from generate_series(1, 20000) as i`;
      assert.equal(rows.length, 20_000);
      assert.equal(rows[19_999]!.i, 20_000);
      assert.equal(rows[19_999]!.pad, String.fromCharCode(65 + (20_000 % 26)).repeat(100));
      let seen = 0;
      for await (const batch of sql`select i from generate_series(1, 20000) as i`.cursor(1000)) {
        seen += batch.length;
      }
      assert.equal(seen, 20_000);
    } finally {
      await sql.end();
    }
  });
});
