/**
 * The service as an operator runs it (`main.ts` in a process of its own, the CLI to provision)
 * on a private PostgreSQL server that the test stops and starts under load.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { adminCli, eventuallyNamed, ROOT } from "./fault_support.ts";
import {
  freePort,
  type PrivatePostgres,
  privatePostgresUnavailable,
  startPrivatePostgres,
} from "./private_postgres.ts";

const _unavailable = privatePostgresUnavailable();

Deno.test({
  name: "postgres restart: 503 while down, recovery on its own, every accepted event stored once",
  ignore: _unavailable !== null,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const pg = await startPrivatePostgres();
    const dir = await Deno.makeTempDir({ prefix: "cdp-restart-" });
    const env = {
      DATABASE_URL: pg.url,
      DATA_DIR: dir,
      KV_PATH: `${dir}/kv.sqlite3`,
      PORT: String(freePort()),
      NO_COLOR: "1",
    };
    const service = new _Service(env);
    const load = new _Load(`http://127.0.0.1:${env.PORT}`);
    try {
      const brand = await adminCli(env, [
        "brand",
        "create",
        "--name",
        "Restart",
        "--shop",
        "restart.myshopify.com",
      ]);
      const { key } = await adminCli(env, ["key", "issue", "--brand", String(brand.id)]);
      load.key = String(key);
      service.start();
      await eventuallyNamed("the service is healthy", () => load.status("/healthz", 200));

      load.start();
      await eventuallyNamed("some events are stored", async () => (await _storedEvents(pg)) > 0);

      for (const mode of ["fast", "immediate"] as const) {
        await pg.stop(mode);
        // Bounded fetches: a hang fails the test instead of stalling it.
        await eventuallyNamed(`healthz 503 (${mode} stop)`, () => load.status("/healthz", 503));
        await load.expectError("/cdp/profiles", { method: "GET" }, 503, "upstream_unavailable");
        await load.expectError(
          "/cdp/events?sync=true",
          {
            method: "POST",
            body: JSON.stringify({ events: [_event("sync-while-down")] }),
          },
          503,
          "upstream_unavailable",
        );
        const acceptedBefore = load.accepted;
        await eventuallyNamed("async ingest still accepts", () => load.accepted > acceptedBefore);
        await pg.start();
        await eventuallyNamed(
          `healthz 200 after the ${mode} stop`,
          () => load.status("/healthz", 200),
        );
        await eventuallyNamed("reads answer again", () => load.status("/cdp/profiles", 200));
      }

      await load.stop();
      assert.ok(load.accepted > 0);
      assert.deepEqual(load.unexpected, [], "every ingest answer was 202");
      await eventuallyNamed(
        "every accepted event is stored",
        async () => (await _storedEvents(pg)) >= load.accepted,
        120_000,
      );
      assert.equal(await _storedEvents(pg), load.accepted, "stored once each");

      const exit = await service.terminate();
      assert.equal(exit.signal, null, "SIGTERM ended the process by itself");
      assert.doesNotMatch(service.log, /"status":500|Uncaught|TypeError/);
    } catch (err) {
      console.error(service.log);
      throw err;
    } finally {
      await load.stop();
      await service.kill();
      await pg.remove();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

function _event(profileId: string) {
  return { eventType: "view", profileId, properties: {} };
}

async function _storedEvents(pg: PrivatePostgres): Promise<number> {
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from events`;
    return row!.n;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Async ingest at a steady pace, counting what the service accepted. */
class _Load {
  key = "";
  accepted = 0;
  unexpected: string[] = [];
  #running: Promise<void> | null = null;
  #stopping = false;
  #sent = 0;

  constructor(readonly base: string) {}

  start(): void {
    this.#running = (async () => {
      while (!this.#stopping) {
        const events = Array.from({ length: 5 }, () => _event(`p-${this.#sent++ % 40}`));
        try {
          const res = await this.fetch("/cdp/events", {
            method: "POST",
            body: JSON.stringify({ events }),
          });
          const body = await res.json();
          if (res.status === 202) this.accepted += body.accepted;
          else this.unexpected.push(`${res.status} ${JSON.stringify(body)}`);
        } catch (err) {
          this.unexpected.push(String(err));
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#running;
  }

  fetch(path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${this.base}${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${this.key}`, "Content-Type": "application/json" },
      signal: AbortSignal.timeout(10_000),
    });
  }

  async status(path: string, expected: number): Promise<boolean> {
    try {
      const res = await this.fetch(path);
      await res.body?.cancel();
      return res.status === expected;
    } catch {
      return false;
    }
  }

  async expectError(path: string, init: RequestInit, status: number, error: string) {
    const res = await this.fetch(path, init);
    const body = await res.json();
    assert.equal(res.status, status, JSON.stringify(body));
    assert.equal(body.error, error);
  }
}

/** `main.ts` in a process of its own. */
class _Service {
  log = "";
  #child: Deno.ChildProcess | null = null;
  #reading: Promise<void>[] = [];

  constructor(readonly env: Record<string, string>) {}

  start(): void {
    this.#child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--unstable-kv", "main.ts"],
      cwd: ROOT,
      env: this.env,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    for (const stream of [this.#child.stdout, this.#child.stderr]) {
      this.#reading.push(
        stream.pipeThrough(new TextDecoderStream()).pipeTo(
          new WritableStream({ write: (chunk) => void (this.log += chunk) }),
        ),
      );
    }
  }

  /** SIGTERM, then the exit status; fails if the process is still running after the bound. */
  async terminate(): Promise<Deno.CommandStatus> {
    const child = this.#child!;
    child.kill("SIGTERM");
    const status = await Promise.race([
      child.status,
      new Promise<null>((resolve) => setTimeout(() => resolve(null), 20_000)),
    ]);
    assert.ok(status, "the process ended within 20 s of SIGTERM");
    await Promise.all(this.#reading);
    this.#child = null;
    return status;
  }

  async kill(): Promise<void> {
    if (!this.#child) return;
    try {
      this.#child.kill("SIGKILL");
    } catch { /* already gone */ }
    await this.#child.status;
    await Promise.all(this.#reading).catch(() => {});
    this.#child = null;
  }
}
