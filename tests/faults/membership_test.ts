/**
 * Segment membership through a crash: `main.ts` in a process of its own on a private PostgreSQL
 * server is killed with SIGKILL while the membership changes of accepted events are being
 * written (events applied, their `membership_update` jobs pending), then started again. Every
 * profile's membership ends up exactly as its properties say, and the change feed holds each
 * entry and exit once, in order: nothing lost, nothing duplicated. On both ingest queues: Deno
 * KV's queue and the outbox (Deno Deploy's).
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { brandApi, eventuallyNamed, killService, spawnService } from "./fault_support.ts";
import { freePort, privatePostgresUnavailable, startPrivatePostgres } from "./private_postgres.ts";

const _unavailable = privatePostgresUnavailable();

/** Profiles per round: enough that a kill lands while their membership is being written. */
const _PROFILES = 1_500;
/** Events per request (the async door's limit). */
const _PER_REQUEST = 50;

for (const ingestQueue of ["kv", "outbox"] as const) {
  Deno.test({
    name: `membership (${ingestQueue} queue): kill -9 while changes are written; ` +
      "members and feed exact after restart",
    ignore: _unavailable !== null,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: () => _scenario(ingestQueue),
  });
}

/** A profile's properties after a round: what its segments are decided on. */
interface _State {
  vip: number;
  spend: number;
}

async function _scenario(ingestQueue: "kv" | "outbox") {
  const pg = await startPrivatePostgres();
  const dir = await Deno.makeTempDir({ prefix: "cdp-membership-" });
  const port = freePort();
  const env = {
    DATABASE_URL: pg.url,
    DATA_DIR: dir,
    KV_PATH: `${dir}/kv.sqlite3`,
    PORT: String(port),
    NO_COLOR: "1",
    INGEST_QUEUE: ingestQueue,
  };
  const base = `http://127.0.0.1:${port}`;
  let service = spawnService(env);
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const api = await brandApi(env, base, { name: "M", shop: "m.myshopify.com" });
    const define = async (name: string, condition: unknown) => {
      const res = await api("/cdp/segments", {
        method: "POST",
        body: JSON.stringify({ name, condition }),
      });
      const body = await res.text();
      assert.ok(res.ok, body);
      return String(JSON.parse(body).id);
    };
    const vip = await define("VIP", {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.vip",
        comparisonOperator: "equals",
        propertyValueInteger: 1,
      },
    });
    const big = await define("Big", {
      type: "profilePropertyCondition",
      parameterValues: {
        propertyName: "properties.spend",
        comparisonOperator: "greaterThanOrEqualTo",
        propertyValueInteger: 100,
      },
    });
    const segments = { [vip]: (s: _State) => s.vip === 1, [big]: (s: _State) => s.spend >= 100 };
    const states = new Map<string, _State>();
    /** Per segment and profile, the changes the feed must hold, in order. */
    const expected = new Map<string, string[]>();
    const send = async (round: Map<string, _State>) => {
      for (const [profileId, state] of round) {
        const before = states.get(profileId);
        for (const [segmentId, holds] of Object.entries(segments)) {
          const was = before ? holds(before) : false;
          if (holds(state) === was) continue;
          const key = `${segmentId} ${profileId}`;
          expected.set(key, [...(expected.get(key) ?? []), holds(state) ? "entered" : "exited"]);
        }
        states.set(profileId, state);
      }
      const events = [...round].map(([profileId, state]) => ({
        eventType: "updateProperties",
        profileId,
        properties: { update: { "properties.vip": state.vip, "properties.spend": state.spend } },
      }));
      // All at once, so the round is accepted before the forwarder is through with it.
      await Promise.all(
        Array.from({ length: Math.ceil(events.length / _PER_REQUEST) }, async (_, k) => {
          const res = await api("/cdp/events", {
            method: "POST",
            body: JSON.stringify({
              events: events.slice(k * _PER_REQUEST, (k + 1) * _PER_REQUEST),
            }),
          });
          assert.equal(res.status, 202, await res.text());
        }),
      );
    };
    const logged = async () =>
      (await sql<{ n: number }[]>`select count(*)::int as n from segment_changes`)[0]!.n;
    /**
     * Sends a round and kills the service as soon as the feed grows (membership is being
     * written, the rest of the round's still pending), then starts it again.
     */
    const sendAndKill = async (round: Map<string, _State>) => {
      const from = await logged();
      await send(round);
      const deadline = Date.now() + 60_000;
      while (await logged() === from) {
        if (Date.now() > deadline) throw new Error("no membership change written");
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await killService(service);
      const total = [...expected.values()].flat().length;
      assert.ok(await logged() < total, "the kill lands while changes are still to be written");
      service = spawnService(env);
    };
    const settled = async () => {
      const rows = await sql<{ segment_id: string; profile_id: string }[]>`
        select segment_id, profile_id from segment_members`;
      const want = [...states].flatMap(([profileId, state]) =>
        Object.entries(segments).filter(([, holds]) => holds(state)).map(([segmentId]) =>
          `${segmentId} ${profileId}`
        )
      );
      return JSON.stringify(rows.map((r) => `${r.segment_id} ${r.profile_id}`).sort()) ===
        JSON.stringify(want.sort());
    };
    const ids = Array.from({ length: _PROFILES }, (_, i) => `p${i}`);

    // 1. Every profile is a VIP; a third spend enough. Killed while entries are written.
    await sendAndKill(new Map(ids.map((id, i) => [id, { vip: 1, spend: i % 3 === 0 ? 150 : 10 }])));
    await eventuallyNamed("every membership after the first restart", settled, 90_000);
    // 2. Half leave VIP, the spenders among the others drop below 100, some enter Big.
    await sendAndKill(
      new Map(ids.map((id, i) => [
        id,
        i % 2 === 0
          ? { vip: 0, spend: i % 3 === 0 ? 150 : 10 }
          : { vip: 1, spend: i % 3 === 0 ? 0 : i % 5 === 0 ? 500 : 10 },
      ])),
    );
    await eventuallyNamed("every membership after the second restart", settled, 90_000);
    // Anything still queued would show now: a duplicate, or a change undone.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    assert.ok(await settled(), "membership still exact");

    const feed = await sql<{ segment_id: string; profile_id: string; change: string }[]>`
      select segment_id, profile_id, change from segment_changes order by position`;
    const actual = new Map<string, string[]>();
    for (const c of feed) {
      const key = `${c.segment_id} ${c.profile_id}`;
      actual.set(key, [...(actual.get(key) ?? []), c.change]);
    }
    assert.deepEqual(
      [...actual].sort(),
      [...expected].sort(),
      "each entry and exit once, in order",
    );
  } catch (err) {
    console.error(service.log());
    throw err;
  } finally {
    await killService(service);
    await sql.end({ timeout: 1 });
    await pg.remove();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
