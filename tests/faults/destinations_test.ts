/**
 * Delivery to a destination through the service as an operator runs it (`main.ts` in a process
 * of its own on a private PostgreSQL server), on both ingest queues: events qualify profiles,
 * the receiver fails for a while, the service is killed with SIGKILL and started again, the
 * database is stopped and started; every `segment.entered` the change log holds reaches the
 * receiver, signed, with the same ids on every attempt.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { brandApi, eventuallyNamed, killService, spawnService } from "./fault_support.ts";
import { freePort, privatePostgresUnavailable, startPrivatePostgres } from "./private_postgres.ts";
import { startReceiver } from "../lib/audiences/webhook_receiver.ts";

const _unavailable = privatePostgresUnavailable();

for (const ingestQueue of ["kv", "outbox"] as const) {
  Deno.test({
    name: `destinations (${ingestQueue} queue): receiver outage, kill -9, database restart: ` +
      "every entry delivered, signed, same ids",
    ignore: _unavailable !== null,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: () => _scenario(ingestQueue),
  });
}

async function _scenario(ingestQueue: "kv" | "outbox") {
  const pg = await startPrivatePostgres();
  const receiver = await startReceiver();
  const dir = await Deno.makeTempDir({ prefix: "cdp-destinations-" });
  const port = freePort();
  const env = {
    DATABASE_URL: pg.url,
    DATA_DIR: dir,
    KV_PATH: `${dir}/kv.sqlite3`,
    PORT: String(port),
    NO_COLOR: "1",
    INGEST_QUEUE: ingestQueue,
    DESTINATIONS_ALLOW_PRIVATE: "true",
    DESTINATION_POLL_MS: "100",
    DESTINATION_BACKOFF_MS: "200",
    DESTINATION_TIMEOUT_MS: "2000",
  };
  const base = `http://127.0.0.1:${port}`;
  let service = spawnService(env);
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    const api = await brandApi(env, base, { name: "D", shop: "d.myshopify.com" });
    const segment = await (await api("/cdp/segments", {
      method: "POST",
      body: JSON.stringify({
        name: "VIP",
        condition: {
          type: "profilePropertyCondition",
          parameterValues: { propertyName: "properties.vip", comparisonOperator: "exists" },
        },
      }),
    })).json();
    const created = await api("/cdp/destinations", {
      method: "POST",
      body: JSON.stringify({
        name: "Hook",
        type: "webhook",
        url: receiver.url,
        segments: [segment.id],
      }),
    });
    assert.equal(created.status, 201);
    const destination = await created.json();
    receiver.secret = destination.secret;
    const qualify = async (profiles: string[]) => {
      const res = await api("/cdp/events", {
        method: "POST",
        body: JSON.stringify({
          events: profiles.map((profileId) => ({
            eventType: "updateProperties",
            profileId,
            properties: {
              update: { "properties.vip": 1, "properties.email": `${profileId}@x.test` },
            },
          })),
        }),
      });
      assert.equal(res.status, 202, await res.text());
    };
    const entered = () => new Set(receiver.accepted().map((d) => d.profile.id));
    const range = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => `p${from + i}`);

    // 1. The receiver fails: attempts are made and retried.
    receiver.respond = 503;
    await qualify(range(0, 10));
    await eventuallyNamed("failed attempts", () => receiver.received.length >= 2);
    // 2. kill -9 while deliveries are pending; the receiver recovers meanwhile.
    await killService(service);
    receiver.respond = 200;
    service = spawnService(env);
    await eventuallyNamed(
      "p0..p9 delivered after the restart",
      () => range(0, 10).every((p) => entered().has(p)),
      60_000,
    );
    // 3. A database restart while deliveries wait in it (the receiver failing meanwhile). The
    // changes are in the log first: membership kept through an outage is aud-members' to test.
    receiver.respond = 503;
    const before = receiver.received.length;
    await qualify(range(10, 20));
    await eventuallyNamed(
      "p10..p19 in the log",
      async () => (await _logged(sql, segment.id)) === 20,
    );
    await eventuallyNamed("a failed attempt", () => receiver.received.length > before);
    await pg.stop("immediate");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await pg.start();
    receiver.respond = 200;
    await eventuallyNamed(
      "p10..p19 delivered after the database restart",
      () => range(10, 20).every((p) => entered().has(p)),
      60_000,
    );
    // 4. And kill -9 while the events are being applied (held up in the database), the service
    // restarted at once: the queue hands the dead process's message back within seconds (Deno
    // KV's reclaim after start; the outbox's 30 s lease).
    await sql`create function slow_insert() returns trigger language plpgsql as $$
      begin perform pg_sleep(3); return null; end $$`;
    await sql`create trigger slow before insert on events
      for each statement execute function slow_insert()`;
    await qualify(range(20, 30));
    await eventuallyNamed("the apply held up", async () => {
      const [row] = await sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where wait_event = 'PgSleep'`;
      return row!.n > 0;
    });
    await killService(service);
    service = spawnService(env);
    await sql`drop trigger slow on events`;
    await eventuallyNamed(
      "p20..p29 in the log",
      async () => (await _logged(sql, segment.id)) === 30,
      ingestQueue === "kv" ? 30_000 : 60_000,
    );
    await eventuallyNamed(
      "p20..p29 delivered",
      () => range(20, 30).every((p) => entered().has(p)),
      60_000,
    );

    const feed = await sql<{ id: string; profile_id: string }[]>`
      select id, profile_id from segment_changes where segment_id = ${segment.id} order by position`;
    const accepted = receiver.accepted();
    assert.deepEqual(
      new Set(accepted.map((d) => d.id)),
      new Set(feed.map((c) => c.id)),
      "the feed and the deliveries agree",
    );
    assert.equal(feed.length, 30);
    assert.ok(receiver.received.every((r) => r.verified), "every POST verifies");
    // A delivery id always carries the same body, however often it was sent.
    const bodies = new Map<string, Set<string>>();
    for (const r of receiver.received) {
      bodies.set(r.deliveryId, (bodies.get(r.deliveryId) ?? new Set()).add(r.body));
    }
    assert.ok([...bodies.values()].every((set) => set.size === 1));
    assert.ok(accepted.every((d) => d.type === "segment.entered" && d.segment.name === "VIP"));
    assert.equal(accepted.find((d) => d.profile.id === "p3")?.profile.identity.email, "p3@x.test");
    // In log order: a profile's change comes after the changes logged before it.
    const order = new Map(feed.map((c, i) => [c.id, i]));
    const firsts = [...new Map(accepted.map((d) => [d.id, order.get(d.id)!])).values()];
    assert.deepEqual(firsts, [...firsts].sort((a, b) => a - b));
  } catch (err) {
    console.error(service.log());
    throw err;
  } finally {
    await killService(service);
    await sql.end({ timeout: 1 });
    await receiver.close();
    await pg.remove();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

async function _logged(sql: postgres.Sql, segmentId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from segment_changes where segment_id = ${segmentId}`;
  return row!.n;
}
