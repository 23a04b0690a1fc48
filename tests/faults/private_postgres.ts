/**
 * A PostgreSQL server of a test's own (initdb + pg_ctl from the machine's installation, run as
 * the `postgres` OS user, on a free port, data in a temp dir), so a test can stop and start it
 * without touching the machine's shared server.
 *
 * @module
 */

/** A private server: its URL and how to stop, start and remove it. */
export interface PrivatePostgres {
  url: string;
  port: number;
  /** `fast` closes sessions (57P01), `immediate` drops them as a crash would. */
  stop(mode?: "fast" | "immediate"): Promise<void>;
  start(): Promise<void>;
  remove(): Promise<void>;
}

/** The directory of the machine's newest PostgreSQL binaries, or null when there are none. */
export function postgresBinDir(): string | null {
  try {
    const versions = [...Deno.readDirSync("/usr/lib/postgresql")]
      .map((entry) => entry.name)
      .filter((name) => /^\d+$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    for (const version of versions) {
      const dir = `/usr/lib/postgresql/${version}/bin`;
      if (_exists(`${dir}/initdb`) && _exists(`${dir}/pg_ctl`)) return dir;
    }
  } catch { /* no installation */ }
  return null;
}

/** Why a private server cannot run here (no binaries, not root), or null when it can. */
export function privatePostgresUnavailable(): string | null {
  if (!postgresBinDir()) return "no PostgreSQL binaries under /usr/lib/postgresql";
  if (Deno.uid() !== 0) return "initdb must run as the postgres user: the test needs root";
  return null;
}

/** Creates and starts a private server with trust auth and a `test` database. */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("no PostgreSQL binaries");
  const dir = await Deno.makeTempDir({ prefix: "cdp-pg-" });
  await Deno.chmod(dir, 0o755);
  const data = `${dir}/data`;
  const port = freePort();
  await _run("chown", ["postgres:postgres", dir]);
  await _asPostgres(`${bin}/initdb`, [
    "-D",
    data,
    "-A",
    "trust",
    "-U",
    "postgres",
    "--no-sync",
    "-E",
    "UTF8",
    "--locale=C",
  ]);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const server: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    port,
    async start() {
      await _asPostgres(`${bin}/pg_ctl`, [
        "-D",
        data,
        "-o",
        options,
        "-l",
        `${dir}/log`,
        "-w",
        "start",
      ]);
    },
    async stop(mode = "fast") {
      await _asPostgres(`${bin}/pg_ctl`, ["-D", data, "-m", mode, "-w", "stop"]);
    },
    async remove() {
      await _asPostgres(`${bin}/pg_ctl`, ["-D", data, "-m", "immediate", "-w", "stop"]).catch(
        () => {},
      );
      await Deno.remove(dir, { recursive: true });
    },
  };
  await server.start();
  await _run(`${bin}/psql`, [
    `postgres://postgres@127.0.0.1:${port}/postgres`,
    "-qc",
    "create database test",
  ]);
  return server;
}

function _exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

async function _asPostgres(command: string, args: string[]): Promise<void> {
  await _run("runuser", ["-u", "postgres", "--", command, ...args]);
}

async function _run(command: string, args: string[]): Promise<void> {
  const { code, stderr, stdout } = await new Deno.Command(command, {
    args,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (code !== 0) {
    const decoder = new TextDecoder();
    throw new Error(
      `${command} ${args.join(" ")} exited ${code}: ${decoder.decode(stderr)}${
        decoder.decode(stdout)
      }`,
    );
  }
}
