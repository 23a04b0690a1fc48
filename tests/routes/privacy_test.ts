import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { OrderLineSchema } from "../../lib/commerce/order_lines.ts";
import { upsertOrder } from "../../lib/commerce/orders.ts";
import { loadConfig } from "../../lib/config.ts";
import { droppedEventsByDay } from "../../lib/privacy/admission.ts";
import { createIngestQueue } from "../../lib/runtime/runtime.ts";
import { errorBody, eventually, type TestContext, withContext } from "../test_support.ts";
import {
  privacyJob,
  requestAndWait,
  sendEvents,
  startPrivacyForwarder,
} from "../lib/privacy/privacy_support.ts";

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;
const newId = monotonicFactory();
const JSON_HEADERS = { "Content-Type": "application/json" };

const post = (ctx: TestContext, key: string, body: unknown) =>
  ctx.request("/cdp/privacy/requests", key, {
    method: "POST",
    headers: JSON_HEADERS,
    body: JSON.stringify(body),
  });

/** Bob: a server profile with an email, an anonymous id merged into it, events and an order. */
async function seedBob(ctx: TestContext, brand: Brand): Promise<void> {
  await sendEvents(ctx, brand.key, [
    {
      eventType: "updateProperties",
      profileId: "bob",
      properties: {
        update: { "properties.email": "Bob@Example.com", "properties.shopifyCustomerId": "207" },
      },
    },
    { eventType: "page_viewed", profileId: "bob", properties: { url: "https://x/" } },
    // A browser id merged into Bob's profile.
    {
      eventType: "page_viewed",
      profileId: "bob",
      target: { itemType: "profile", itemId: "bob-browser" },
    },
    { eventType: "page_viewed", profileId: "bob-browser" },
    { eventType: "page_viewed", profileId: "ann", properties: { url: "https://x/" } },
  ]);
  await ctx.sql.begin(async (tx) => {
    for (
      const [id, customer, total] of [
        ["1", { shopify_customer_id: "207", email: "bob@example.com" }, "100.00"],
        ["2", { email: "ann@example.com" }, "50.00"],
      ] as const
    ) {
      await upsertOrder(tx as never, {
        brandId: brand.brandId,
        line: OrderLineSchema.parse({
          external_id: id,
          number: `#${id}`,
          state: "complete",
          billing_status: "complete",
          total,
          currency_code: "USD",
          created_at: "2026-10-01T00:00:00Z",
          customer,
          line_items: [{ title: "P", quantity: 1, price: total, product_id: "P1" }],
        }),
        newId,
        now: ctx.clock.now(),
      });
    }
  });
}

const get = async (ctx: TestContext, key: string, path: string) => {
  const res = await ctx.request(path, key);
  return { status: res.status, body: await res.json() };
};

Deno.test("privacy requests: 202 shape, list and one, 404 for another brand's, 400 for malformed input", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    const res = await post(ctx, a.key, { type: "export", identifier: " nobody@example.com " });
    assert.equal(res.status, 202);
    const created = await res.json();
    assert.deepEqual(Object.keys(created).sort(), [
      "created_at",
      "id",
      "identifier",
      "status",
      "type",
    ]);
    assert.equal(created.type, "export");
    assert.equal(created.status, "pending");
    assert.equal(created.identifier, "nobody@example.com");
    assert.equal(created.created_at, ctx.clock.now().toISOString());
    const one = await get(ctx, a.key, `/cdp/privacy/requests/${created.id}`);
    assert.equal(one.status, 200);
    assert.equal(one.body.requested_by, `key:${a.keyId}`);
    const list = await get(ctx, a.key, "/cdp/privacy/requests?type=export");
    assert.equal(list.body.totalSize, 1);
    assert.equal(list.body.list[0].id, created.id);
    assert.equal(list.body.scope, a.scope);
    // Another brand's request is the same 404 as a missing one, download included.
    for (const path of [`/cdp/privacy/requests/${created.id}`, "/cdp/privacy/requests/nope"]) {
      const res = await ctx.request(path, b.key);
      assert.equal(res.status, 404);
      assert.equal((await errorBody(res)).error, "not_found");
    }
    const foreign = await ctx.request(`/cdp/privacy/requests/${created.id}/download`, b.key);
    assert.equal(foreign.status, 404);
    await foreign.body?.cancel();
    assert.equal((await get(ctx, b.key, "/cdp/privacy/requests")).body.totalSize, 0);
    // Not completed yet: no document.
    const early = await ctx.request(`/cdp/privacy/requests/${created.id}/download`, a.key);
    assert.equal(early.status, 409);
    await early.body?.cancel();
    for (
      const body of [
        { type: "delete", identifier: "x" },
        { type: "erase" },
        { type: "erase", identifier: "" },
        { type: "erase", identifier: "x", scope: "other.myshopify.com" },
        { type: "erase", identifier: "x".repeat(321) },
      ]
    ) {
      const res = await post(ctx, a.key, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal((await errorBody(res)).error, "bad_request");
    }
    const bad = await ctx.request("/cdp/privacy/requests", a.key, {
      method: "POST",
      headers: JSON_HEADERS,
      body: "{not json",
    });
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
    const spec = await (await ctx.request("/openapi.json", null)).json();
    for (const path of ["/cdp/privacy/requests", "/cdp/privacy/requests/{id}/download"]) {
      assert.ok(spec.paths[path], path);
    }
  });
});

Deno.test("privacy requests: an unknown person completes with zero counts, through the queue", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    void startPrivacyForwarder(ctx);
    for (const type of ["erase", "export", "unsuppress"]) {
      const done = await requestAndWait(ctx, a.key, { type, identifier: "+14155550000" });
      assert.equal(done.status, "completed", type);
      const counts = done.counts as Record<string, number>;
      assert.ok(Object.keys(counts).length > 0, type);
      assert.ok(Object.values(counts).every((n) => n === 0), `${type} ${JSON.stringify(counts)}`);
      assert.equal(done.completed_at, ctx.clock.now().toISOString());
    }
    // Nobody known, but the identifier itself is suppressed.
    const suppressed = await requestAndWait(ctx, a.key, {
      type: "suppress",
      identifier: "+14155550000",
    });
    assert.deepEqual(suppressed.counts, { profiles: 0, identifiers_blocked: 1, dropped: 0 });
  });
});

Deno.test("erase: the person is gone from every route; revenue stays, LTV drops; the audit keeps a hash", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    await seedBob(ctx, a);
    const revenue = (await get(ctx, a.key, "/cdp/insights/revenue")).body;
    const ltvBefore = (await get(ctx, a.key, "/cdp/insights/ltv")).body;
    // The audiences' erasers are wired here: one runs in the erase's transaction.
    const erased: unknown[] = [];
    void startPrivacyForwarder(ctx, ctx.queue, {
      erasers: {
        members: async (tx, target) => {
          const [row] = await tx<{ n: number }[]>`select count(*)::int as n from profiles
                                                  where scope = ${target.scope}`;
          const { brandId, scope, profileIds, emails } = target;
          erased.push({ brandId, scope, profileIds, emails, profilesLeft: row!.n });
          return { removed: target.profileIds.length };
        },
      },
    });
    // By the merged browser id: the whole person goes.
    const done = await requestAndWait(ctx, a.key, { type: "erase", identifier: "bob-browser" });
    assert.equal(done.status, "completed");
    assert.equal(done.identifier, null);
    // Called once, inside the transaction that already removed the profile (Ann's is left).
    assert.deepEqual(erased, [{
      brandId: a.brandId,
      scope: a.scope,
      profileIds: ["bob", "bob-browser"],
      emails: ["bob@example.com"],
      profilesLeft: 1,
    }]);
    assert.deepEqual(done.counts, {
      members_removed: 2,
      profiles: 1,
      aliases: 1,
      events: 4,
      sessions: 2,
      contacts: 1,
      orders_unlinked: 1,
      subscriptions_unlinked: 0,
      dropped: 0,
    });
    for (
      const path of [
        "/cdp/profiles/bob",
        "/cdp/profiles/bob-browser",
        "/cdp/profiles/bob/events",
        "/cdp/customers/bob@example.com",
        "/cdp/customers/207",
      ]
    ) {
      assert.equal((await get(ctx, a.key, path)).status, 404, path);
    }
    const customers = await get(ctx, a.key, "/cdp/profiles?bucket=customers");
    assert.deepEqual(customers.body.list.map((p: { itemId: string }) => p.itemId), ["ann"]);
    assert.equal((await get(ctx, a.key, "/cdp/profiles/ann")).status, 200);
    // The brand's revenue is unchanged; what was attributed to Bob is not.
    assert.deepEqual((await get(ctx, a.key, "/cdp/insights/revenue")).body, revenue);
    // LTV counts customers' orders: Bob's 100.00 leaves it.
    assert.equal(ltvBefore.total_revenue, "150.00");
    assert.equal((await get(ctx, a.key, "/cdp/insights/ltv")).body.total_revenue, "50.00");
    const order = (await get(ctx, a.key, "/cdp/commerce/orders/1")).body;
    assert.equal(order.total, "100.00");
    assert.equal(order.customer.contact_id, null);
    // No personal data left in the request or the audit.
    const [stored] = await ctx.sql`
      select identifier, extra_identifiers from privacy_requests where id = ${done.id as string}`;
    assert.deepEqual(stored, { identifier: null, extra_identifiers: [] });
    const audit = await ctx.sql`select * from privacy_audit where request_id = ${done
      .id as string}`;
    assert.equal(audit.length, 1);
    assert.equal(audit[0]!.outcome, "completed");
    assert.doesNotMatch(JSON.stringify(audit), /bob/i);
    assert.equal(audit[0]!.counts.events, 4);
  });
});

Deno.test("erase: events queued before it never bring the person back; later ones do (KV queue)", async () => {
  await withContext(async (ctx) => {
    await erasedWhileQueued(ctx, ctx.queue.kind);
  });
});

Deno.test("erase: events queued before it never bring the person back; later ones do (outbox)", async () => {
  const queueKv = await Deno.openKv(":memory:");
  const config = loadConfig({ DATA_DIR: "/nonexistent" });
  const outbox = createIngestQueue(queueKv, { ...config, ingestQueue: "outbox" }, newId);
  try {
    await withContext(
      async (ctx) => {
        await erasedWhileQueued(ctx, "outbox");
      },
      {},
      { queue: outbox },
    );
  } finally {
    outbox.stop();
    queueKv.close();
  }
});

async function erasedWhileQueued(ctx: TestContext, kind: string): Promise<void> {
  assert.equal(ctx.queue.kind, kind);
  const a = await ctx.seedBrand();
  await seedBob(ctx, a);
  // Accepted (202) and queued, not applied: the forwarder is not running yet.
  await sendEvents(ctx, a.key, [
    { eventType: "page_viewed", profileId: "bob" },
    { eventType: "page_viewed", profileId: "bob-browser" },
    // A new anonymous id carrying Bob's email: still Bob.
    {
      eventType: "updateProperties",
      profileId: "anon-7",
      properties: { update: { "properties.email": "bob@example.com" } },
    },
    { eventType: "page_viewed", profileId: "ann" },
  ], { async: true });
  // The erase runs (its job called as the forwarder would) while those wait in the queue.
  const res = await post(ctx, a.key, { type: "erase", identifier: "bob@example.com" });
  const { id } = await res.json();
  await privacyJob(ctx)({ kind: "privacy_request", brandId: a.brandId, requestId: id });
  assert.equal((await get(ctx, a.key, "/cdp/profiles/bob")).status, 404);
  // Now the forwarder applies the queued batch (and redelivers the erase's own message).
  void startPrivacyForwarder(ctx);
  await eventually(async () => (await ctx.queue.backlog()) === 0);
  for (const id of ["bob", "bob-browser", "anon-7"]) {
    assert.equal((await get(ctx, a.key, `/cdp/profiles/${id}`)).status, 404, id);
  }
  const [events] = await ctx.sql`
    select count(*)::int as n from events where scope = ${a.scope} and profile_id <> 'ann'`;
  assert.equal(events!.n, 0);
  // Ann's event of the same batch was applied.
  assert.equal((await get(ctx, a.key, "/cdp/profiles/ann/events")).body.totalSize, 2);
  const view = (await get(ctx, a.key, `/cdp/privacy/requests/${id}`)).body;
  assert.equal(view.status, "completed");
  assert.equal(view.counts.dropped, 3);
  // Erasure is not suppression: an event accepted after it is the person's new data.
  ctx.clock.advance(1_000);
  await sendEvents(ctx, a.key, [{ eventType: "page_viewed", profileId: "bob" }]);
  assert.equal((await get(ctx, a.key, "/cdp/profiles/bob")).status, 200);
}

Deno.test("export: one document with everything held about the person, downloadable", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    await seedBob(ctx, a);
    const segment = await ctx.request("/cdp/segments", a.key, {
      method: "POST",
      headers: JSON_HEADERS,
      body: JSON.stringify({
        name: "Everyone",
        condition: {
          type: "profilePropertyCondition",
          parameterValues: {
            propertyName: "properties.nbOfVisits",
            comparisonOperator: "greaterThan",
            propertyValueInteger: 0,
          },
        },
      }),
    });
    assert.equal(segment.status, 200, await segment.text());
    void startPrivacyForwarder(ctx);
    const done = await requestAndWait(ctx, a.key, { type: "export", identifier: "207" });
    assert.equal(done.status, "completed");
    assert.equal(done.identifier, "207");
    assert.equal(done.download_available, true);
    assert.deepEqual(done.counts, {
      profiles: 1,
      merged_ids: 1,
      events: 4,
      sessions: 2,
      contacts: 1,
      orders: 1,
      subscriptions: 0,
    });
    const res = await ctx.request(`/cdp/privacy/requests/${done.id}/download`, a.key);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type")!, /application\/json/);
    const doc = await res.json();
    assert.equal(doc.profiles[0].id, "bob");
    assert.deepEqual(doc.profiles[0].merged_ids, ["bob-browser"]);
    assert.equal(doc.profiles[0].properties.email, "Bob@Example.com");
    assert.deepEqual(doc.profiles[0].consents, {});
    assert.equal(doc.profiles[0].segments.length, 1);
    assert.equal(doc.events.length, 4);
    assert.ok(doc.events.every((e: { profileId: string }) => e.profileId.startsWith("bob")));
    assert.equal(doc.sessions.length, 2);
    assert.equal(doc.contacts[0].email, "bob@example.com");
    assert.equal(doc.orders[0].external_id, "1");
    assert.equal(doc.orders[0].line_items.length, 1);
    assert.deepEqual(doc.subscriptions, []);
    // Erasing the person takes their export with it.
    await requestAndWait(ctx, a.key, { type: "erase", identifier: "bob" });
    const gone = await ctx.request(`/cdp/privacy/requests/${done.id}/download`, a.key);
    assert.equal(gone.status, 404);
    await gone.body?.cancel();
  });
});

Deno.test("suppress: later events are dropped before they are stored and counted; unsuppress ends it; it outlives erasure", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    await seedBob(ctx, a);
    void startPrivacyForwarder(ctx);
    const suppressed = await requestAndWait(ctx, a.key, {
      type: "suppress",
      identifier: "bob@example.com",
    });
    assert.equal(suppressed.status, "completed");
    assert.equal(suppressed.identifier, "bob@example.com");
    const eventsOf = async () =>
      (await ctx.sql`
        select count(*)::int as n from events where scope = ${a.scope} and profile_id <> 'ann'`)[0]!
        .n;
    const before = await eventsOf();
    // By profile id, merged id, and an email in another profile's properties (any case).
    await sendEvents(ctx, a.key, [
      { eventType: "page_viewed", profileId: "bob" },
      { eventType: "page_viewed", profileId: "bob-browser" },
      { eventType: "page_viewed", profileId: "x-1", properties: { email: "BOB@example.com" } },
      { eventType: "page_viewed", profileId: "ann" },
    ]);
    await sendEvents(ctx, a.key, [{ eventType: "page_viewed", profileId: "bob" }], {
      async: true,
    });
    await eventually(async () => (await ctx.queue.backlog()) === 0);
    assert.equal(await eventsOf(), before);
    assert.equal((await get(ctx, a.key, "/cdp/profiles/x-1")).status, 404);
    const view = (await get(ctx, a.key, `/cdp/privacy/requests/${suppressed.id}`)).body;
    assert.equal(view.counts.dropped, 4);
    // In usage (`deno task admin usage`), on the day they were accepted.
    assert.deepEqual(await droppedEventsByDay(ctx.sql, a.brandId), [
      { day: "2026-11-21", events: 4 },
    ]);
    // Erased, then the suppression still holds.
    await requestAndWait(ctx, a.key, { type: "erase", identifier: "bob@example.com" });
    ctx.clock.advance(1_000);
    await sendEvents(ctx, a.key, [{ eventType: "page_viewed", profileId: "bob" }]);
    assert.equal((await get(ctx, a.key, "/cdp/profiles/bob")).status, 404);
    const lifted = await requestAndWait(ctx, a.key, { type: "unsuppress", identifier: "bob" });
    assert.equal((lifted.counts as Record<string, number>).suppressions_lifted, 1);
    await sendEvents(ctx, a.key, [{ eventType: "page_viewed", profileId: "bob" }]);
    assert.equal((await get(ctx, a.key, "/cdp/profiles/bob")).status, 200);
  });
});

Deno.test("consent: modifyConsent keeps the profile's consents, shown in the profile and the customer record, addressable in conditions", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const consentEvent = (profileId: string, status: string, typeIdentifier = "newsletter") => ({
      eventType: "modifyConsent",
      profileId,
      properties: {
        consent: { typeIdentifier, status, statusDate: "2026-11-20T00:00:00Z" },
      },
    });
    await sendEvents(ctx, a.key, [
      {
        eventType: "updateProperties",
        profileId: "bob",
        properties: { update: { "properties.email": "bob@example.com" } },
      },
      consentEvent("bob", "GRANTED"),
      consentEvent("bob", "DENIED", "sms"),
      consentEvent("ann", "GRANTED", "sms"),
    ]);
    const profile = (await get(ctx, a.key, "/cdp/profiles/bob")).body.profile;
    assert.deepEqual(profile.consents, {
      newsletter: {
        scope: a.scope,
        typeIdentifier: "newsletter",
        status: "GRANTED",
        statusDate: "2026-11-20T00:00:00.000Z",
        revokeDate: null,
      },
      sms: {
        scope: a.scope,
        typeIdentifier: "sms",
        status: "DENIED",
        statusDate: "2026-11-20T00:00:00.000Z",
        revokeDate: null,
      },
    });
    const record = (await get(ctx, a.key, "/cdp/customers/bob@example.com")).body;
    assert.deepEqual(record.profile.consents, profile.consents);
    const count = async (key: string, value: string) => {
      const res = await ctx.request("/cdp/query/profile/count", a.key, {
        method: "POST",
        headers: JSON_HEADERS,
        body: JSON.stringify({
          condition: {
            type: "profilePropertyCondition",
            parameterValues: {
              propertyName: `consents.${key}.status`,
              comparisonOperator: "equals",
              propertyValue: value,
            },
          },
        }),
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      return body.count;
    };
    assert.equal(await count("newsletter", "GRANTED"), 1);
    assert.equal(await count("sms", "GRANTED"), 1);
    assert.equal(await count("sms", "DENIED"), 1);
    // Revoked: the entry goes, as in Unomi.
    await sendEvents(ctx, a.key, [consentEvent("bob", "REVOKED")]);
    assert.equal(await count("newsletter", "GRANTED"), 0);
    const bad = await ctx.request("/cdp/query/profile/count", a.key, {
      method: "POST",
      headers: JSON_HEADERS,
      body: JSON.stringify({
        condition: {
          type: "profilePropertyCondition",
          parameterValues: {
            propertyName: "consents.newsletter.nope",
            comparisonOperator: "exists",
          },
        },
      }),
    });
    assert.equal(bad.status, 400);
    assert.equal((await errorBody(bad)).error, "invalid_condition");
  });
});
