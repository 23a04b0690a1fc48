/**
 * A Postgres wire-protocol server over one embedded PGlite instance.
 *
 * @module
 */
/**
 * Serves one PGlite instance to many Postgres wire-protocol connections on a Unix socket.
 *
 * PGlite runs one session, so connections take turns. A turn is a whole message group: the
 * messages up to and including a Sync, a simple Query or a Flush (or a startup packet), run
 * under PGlite's exclusive lock. A connection keeps the session after its group while it has a
 * transaction open, or after a Flush (its unnamed statement and portal are still to be used),
 * so no other connection's statement can land inside its transaction or exchange. (pglite-socket's multiplexer
 * schedules single messages instead, so another connection's Parse/Bind can fall between a Bind
 * and its Execute: "portal does not exist".)
 */
import type { PGlite } from "@electric-sql/pglite";
import { createServer, type Server, type Socket } from "node:net";

const _SSL_REQUEST = 80877103;
const _GSS_REQUEST = 80877104;
const _CANCEL_REQUEST = 80877102;
const _PROTOCOL_3 = 196608;
// Messages that end a group: Sync, simple Query, and Flush (a client that flushes waits for the
// answer before it sends the rest of its extended-protocol exchange).
const _GROUP_END = new Set(["S", "Q", "H"]);

interface _Connection {
  id: number;
  socket: Socket;
  buffer: Uint8Array;
  started: boolean;
  group: Uint8Array[];
  /** Groups ready to run, in order. */
  ready: Uint8Array[][];
  running: boolean;
  closed: boolean;
}

/** A running server; `close` stops accepting, ends connections and rolls back an open transaction. */
export interface PgliteServer {
  close(): Promise<void>;
}

/** Starts serving `pglite` on the Unix socket at `path`. */
export async function startPgliteServer(pglite: PGlite, path: string): Promise<PgliteServer> {
  const connections = new Set<_Connection>();
  // The connection whose transaction is open, and those waiting for their turn.
  let holder: _Connection | null = null;
  const waiting: _Connection[] = [];
  let nextId = 1;

  let pumping = false;

  // One loop at a time: a second loop could run another connection's group between a group
  // that opened a transaction and the moment its connection becomes the holder.
  async function pump(): Promise<void> {
    if (pumping) return;
    pumping = true;
    try {
      while (true) {
        const candidate = holder ?? waiting.find((c) => c.ready.length > 0);
        if (!candidate || candidate.ready.length === 0) return;
        const group = candidate.ready.shift()!;
        const endsWithFlush = group[group.length - 1]![0] === 0x48; // 'H'
        candidate.running = true;
        let inTransaction = false;
        try {
          inTransaction = await pglite.runExclusive(async () => {
            for (const message of group) {
              await pglite.execProtocolRawStream(message, {
                onRawData: (data) => {
                  // PGlite reuses the buffer behind `data`; a socket that cannot flush at once
                  // keeps the view, so it must get its own copy.
                  if (!candidate.closed) candidate.socket.write(data.slice());
                },
              });
            }
            return pglite.isInTransaction();
          });
        } catch (err) {
          candidate.socket.destroy(err instanceof Error ? err : new Error(String(err)));
        } finally {
          candidate.running = false;
        }
        holder = (inTransaction || endsWithFlush) && !candidate.closed ? candidate : null;
        if (candidate.closed) await _release(candidate);
        if (candidate.ready.length === 0) {
          const index = waiting.indexOf(candidate);
          if (index >= 0) waiting.splice(index, 1);
        }
      }
    } finally {
      pumping = false;
    }
  }

  async function _release(connection: _Connection): Promise<void> {
    connections.delete(connection);
    const index = waiting.indexOf(connection);
    if (index >= 0) waiting.splice(index, 1);
    if (holder === connection) {
      holder = null;
      // A client that vanished mid-transaction must not leave the session inside it.
      if (pglite.isInTransaction()) await pglite.exec("rollback").catch(() => {});
    }
  }

  function onData(connection: _Connection, chunk: Uint8Array): void {
    connection.buffer = _concat(connection.buffer, chunk);
    while (true) {
      const buffer = connection.buffer;
      if (!connection.started) {
        // Startup phase: length-prefixed packets without a type byte.
        if (buffer.length < 8) return;
        const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
        const length = view.getInt32(0);
        if (buffer.length < length) return;
        const code = view.getInt32(4);
        connection.buffer = buffer.slice(length);
        if (code === _SSL_REQUEST || code === _GSS_REQUEST) {
          connection.socket.write("N");
          continue;
        }
        if (code === _CANCEL_REQUEST) continue; // PGlite has no backend to signal.
        if (code !== _PROTOCOL_3) {
          connection.socket.destroy();
          return;
        }
        connection.started = true;
        _enqueue(connection, [buffer.slice(0, length)]);
        continue;
      }
      if (buffer.length < 5) return;
      const length = 1 +
        new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength).getInt32(1);
      if (buffer.length < length) return;
      const message = buffer.slice(0, length);
      connection.buffer = buffer.slice(length);
      const type = String.fromCharCode(message[0]!);
      if (type === "X") {
        connection.socket.end();
        return;
      }
      connection.group.push(message);
      if (_GROUP_END.has(type)) {
        _enqueue(connection, connection.group);
        connection.group = [];
      }
    }
  }

  function _enqueue(connection: _Connection, group: Uint8Array[]): void {
    connection.ready.push(group);
    if (!waiting.includes(connection)) waiting.push(connection);
    void pump();
  }

  const server: Server = createServer((socket) => {
    const connection: _Connection = {
      id: nextId++,
      socket,
      buffer: new Uint8Array(0),
      started: false,
      group: [],
      ready: [],
      running: false,
      closed: false,
    };
    connections.add(connection);
    socket.on("data", (chunk: Uint8Array) => onData(connection, chunk));
    socket.on("error", () => {});
    socket.on("close", () => {
      connection.closed = true;
      connection.ready = [];
      if (!connection.running) void _release(connection).then(pump);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => resolve());
  });
  return {
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const connection of connections) connection.socket.destroy();
      });
      if (pglite.isInTransaction()) await pglite.exec("rollback").catch(() => {});
    },
  };
}

function _concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
