import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  enqueueSegmentRefresh,
  enqueueSweep,
  membershipForwarding,
  type MembershipUpdateMessage,
} from "../../../lib/audiences/jobs.ts";
import type { MembershipDeps } from "../../../lib/audiences/membership.ts";
import { createEmbeddedEngine } from "../../../lib/engine/embedded.ts";
import type { IngestEvent } from "../../../lib/engine/engine.ts";
import type { Condition } from "../../../lib/engine/conditions.ts";
import { createSegment } from "../../../lib/engine/segments.ts";
import {
  createQueueHandler,
  type ForwarderDeps,
  startForwarder,
} from "../../../lib/ingest/forwarder.ts";
import { createOutboxQueue } from "../../../lib/ingest/outbox.ts";
import { createKvQueue, type EventsMessage, listDeadLetters } from "../../../lib/ingest/queue.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { eventually, freshDatabase, type TestClock, testClock } from "../../test_support.ts";

const A = "acme.myshopify.com";
const newId = monotonicFactory();

const adults: Condition = {
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.age",
    comparisonOperator: "greaterThanOrEqualTo",
    propertyValueInteger: 18,
  },
};
const seenToday: Condition = {
  type: "profilePropertyCondition",
  parameterValues: {
    propertyName: "properties.lastVisit",
    comparisonOperator: "greaterThan",
    propertyValueDateExpr: "now-1d",
  },
};

function ageEvent(profileId: string, age: number): IngestEvent {
  return {
    id: newId(),
    eventType: "updateProperties",
    profileId,
    properties: { update: { "properties.age": age } },
  };
}

/** Membership over `sql` on the test clock, with a permit always free. */
function membershipDeps(sql: Sql, clock: TestClock): MembershipDeps {
  return {
    sql,
    now: clock.now,
    budget: () => ({ permit: () => () => {}, timeoutMs: 10_000 }),
    refreshTimeoutMs: 10_000,
  };
}

async function members(sql: Sql, segment: string): Promise<string[]> {
  const rows = await sql<{ profile_id: string }[]>`
    select profile_id from segment_members where scope = ${A} and segment_id = ${segment}
    order by profile_id`;
  return rows.map((r) => r.profile_id);
}

async function feedSize(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from segment_changes`;
  return row!.n;
}

for (const kind of ["kv", "outbox"] as const) {
  Deno.test(`membership through the ${kind} queue: applied groups, a segment refresh and the time sweep`, async () => {
    const db = await freshDatabase();
    const kv = await Deno.openKv(":memory:");
    const clock = testClock();
    const queue = kind === "kv"
      ? createKvQueue(kv, { newId })
      : createOutboxQueue(kv, { newId, pollMs: 20, maxIdleMs: 50 });
    try {
      const engine = createEmbeddedEngine({ sql: db.sql, now: clock.now });
      const deps = membershipDeps(db.sql, clock);
      const membership = membershipForwarding(deps, queue);
      const running = startForwarder({
        queue,
        engine,
        now: clock.now,
        afterApply: membership.afterApply,
        jobs: membership.jobs,
      });
      const adultsId = `seg__${A}__adults`;
      const todayId = `seg__${A}__today`;
      for (const [id, condition] of [[adultsId, adults], [todayId, seenToday]] as const) {
        await createSegment(db.sql, { scope: A, id, name: id, condition, now: clock.now() });
      }
      await queue.accept({
        brandId: "brand_a",
        batch: {
          scope: A,
          source: "server",
          receivedAt: clock.now().toISOString(),
          events: [ageEvent("p1", 30), ageEvent("p2", 12)],
        },
      });
      await eventually(async () => (await members(db.sql, todayId)).length === 2);
      assert.deepEqual(await members(db.sql, adultsId), ["p1"]);

      // A segment defined over existing profiles fills on its refresh job.
      const allId = `seg__${A}__teens`;
      await createSegment(db.sql, {
        scope: A,
        id: allId,
        name: "teens",
        condition: {
          ...adults,
          parameterValues: { ...adults.parameterValues, comparisonOperator: "lessThan" },
        },
        now: clock.now(),
      });
      assert.ok(await enqueueSegmentRefresh(queue, A, allId));
      await eventually(async () => (await members(db.sql, allId)).length === 1);
      assert.deepEqual(await members(db.sql, allId), ["p2"]);

      // Two days later, with no event at all, the sweep takes both out of "seen today" only.
      clock.advance(2 * 86_400_000);
      assert.ok(await enqueueSweep(queue, clock.now()));
      await eventually(async () => (await members(db.sql, todayId)).length === 0);
      assert.deepEqual(await members(db.sql, adultsId), ["p1"]);
      assert.deepEqual(await members(db.sql, allId), ["p2"]);
      // The sweep's marker is cleared when it ends: the next minute's sweep can be queued.
      await eventually(async () => await enqueueSweep(queue, clock.now()));
      queue.stop();
      kv.close();
      await running.catch(() => {});
    } finally {
      try {
        kv.close();
      } catch { /* closed above */ }
      await db.close();
    }
  });
}

/** What the hook tests share: stores, the adults segment, and a queue that keeps what is sent. */
interface _HookFixture {
  sql: Sql;
  clock: TestClock;
  engine: ReturnType<typeof createEmbeddedEngine>;
  queue: ReturnType<typeof createKvQueue>;
  segment: string;
  /** The membership messages sent through `capture`, in order. */
  sent: MembershipUpdateMessage[];
  capture: { kv: Deno.Kv; send: (message: unknown) => Promise<boolean> };
  /** An events message setting a profile's age. */
  events(profileId: string, age: number): EventsMessage;
  /** The forwarder's handler with `afterApply` as its hook. */
  handler(afterApply: ForwarderDeps["afterApply"]): (message: unknown) => Promise<void>;
}

async function withHookFixture(fn: (f: _HookFixture) => Promise<void>): Promise<void> {
  const db = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  const clock = testClock();
  try {
    const engine = createEmbeddedEngine({ sql: db.sql, now: clock.now });
    const queue = createKvQueue(kv, { newId });
    const segment = `seg__${A}__adults`;
    await createSegment(db.sql, {
      scope: A,
      id: segment,
      name: "adults",
      condition: adults,
      now: clock.now(),
    });
    const sent: MembershipUpdateMessage[] = [];
    await fn({
      sql: db.sql,
      clock,
      engine,
      queue,
      segment,
      sent,
      capture: {
        kv,
        send: (message) => {
          sent.push(message as MembershipUpdateMessage);
          return Promise.resolve(true);
        },
      },
      events: (profileId, age) => ({
        kind: "events",
        id: newId(),
        brandId: "brand_a",
        batch: {
          scope: A,
          source: "server",
          receivedAt: clock.now().toISOString(),
          events: [ageEvent(profileId, age)],
        },
      }),
      handler: (afterApply) => createQueueHandler({ queue, engine, now: clock.now, afterApply }),
    });
  } finally {
    kv.close();
    await db.close();
  }
}

Deno.test("membership: a redelivered group changes nothing twice; a hook that cannot queue fails the delivery", async () => {
  await withHookFixture(async ({ sql, clock, sent, capture, events, handler }) => {
    const membership = membershipForwarding(membershipDeps(sql, clock), capture);
    const handle = handler(membership.afterApply);
    const message = events("p1", 30);
    await handle(message);
    await handle(structuredClone(message));
    assert.equal(sent.length, 2, "each delivery queues its update");
    for (const update of sent) await membership.jobs.membership_update!(update);
    await membership.jobs.membership_update!(structuredClone(sent[0]));
    await membership.settled();
    assert.equal(await feedSize(sql), 1);

    const failing = handler(() => Promise.reject(new Error("membership store down")));
    // A hook that cannot queue the update fails the delivery, so the queue delivers it again.
    await assert.rejects(failing(events("p2", 40)), /membership store down/);
    const [row] = await sql`select count(*)::int as n from profiles where item_id = 'p2'`;
    assert.equal(row!.n, 1, "the group is applied");
    assert.deepEqual(await listDeadLetters(capture.kv), []);
    assert.equal(await feedSize(sql), 1);
  });
});

Deno.test("membership: the hook writes the update at once; its job then evaluates nothing, while one elsewhere or after a failed run does", async () => {
  await withHookFixture(async ({ sql, clock, engine, segment, sent, capture, events, handler }) => {
    const membership = membershipForwarding(membershipDeps(sql, clock), capture);
    await handler(membership.afterApply)(events("p1", 30));
    await membership.settled();
    // Written with no job run: the message is only the backstop.
    assert.deepEqual(await members(sql, segment), ["p1"]);
    assert.equal(sent.length, 1);
    assert.ok(sent[0]!.token);

    // p1 turns 12 behind the hook's back: the job of the committed eager run evaluates nothing.
    await engine.applyEvents(events("p1", 12).batch);
    await membership.jobs.membership_update!(sent[0]);
    assert.deepEqual(await members(sql, segment), ["p1"]);
    // The same message in another process (no eager run there) evaluates p1: it leaves.
    const elsewhere = membershipForwarding(membershipDeps(sql, clock), capture);
    await elsewhere.jobs.membership_update!(sent[0]);
    assert.deepEqual(await members(sql, segment), []);

    // An eager run that fails leaves the update to its job.
    let failures = 1;
    const flaky = membershipForwarding({
      ...membershipDeps(sql, clock),
      budget: (scope) => {
        if (failures-- > 0) throw new Error(`database busy: ${scope}`);
        return { permit: () => () => {}, timeoutMs: 10_000 };
      },
    }, capture);
    await handler(flaky.afterApply)(events("p2", 40));
    await flaky.settled();
    assert.deepEqual(await members(sql, segment), []);
    await flaky.jobs.membership_update!(sent.at(-1));
    assert.deepEqual(await members(sql, segment), ["p2"]);
  });
});
