import assert from "node:assert/strict";
import { errorBody, type TestContext, withContext } from "../test_support.ts";
import { documentedVerifier, startReceiver } from "../lib/audiences/webhook_receiver.ts";

type Brand = Awaited<ReturnType<TestContext["seedBrand"]>>;

const send = (ctx: TestContext, key: string, method: string, path: string, body?: unknown) =>
  ctx.request(path, key, {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

async function segment(ctx: TestContext, brand: Brand, name: string): Promise<string> {
  const res = await send(ctx, brand.key, "POST", "/cdp/segments", {
    name,
    condition: {
      type: "profilePropertyCondition",
      parameterValues: { propertyName: "properties.email", comparisonOperator: "exists" },
    },
  });
  assert.equal(res.status, 200);
  return (await res.json()).id;
}

const body = (segments: string[], url = "https://hooks.example.com/cdp") => ({
  name: "Email tool",
  type: "webhook",
  url,
  segments,
});

Deno.test("destinations: create shows the secret once; list, get, put, delete never show it", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const vip = await segment(ctx, a, "VIP");
    const lapsed = await segment(ctx, a, "Lapsed");
    const created = await send(ctx, a.key, "POST", "/cdp/destinations", body([vip]));
    assert.equal(created.status, 201);
    const dest = await created.json();
    assert.match(dest.id, /^dst_/);
    assert.match(dest.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
    assert.equal(dest.scope, a.scope);
    assert.deepEqual(dest.segments, [vip]);

    const listed = await (await send(ctx, a.key, "GET", "/cdp/destinations")).json();
    assert.equal(listed.totalSize, 1);
    assert.equal(listed.nextCursor, null);
    assert.equal(listed.list[0].id, dest.id);
    assert.ok(!JSON.stringify(listed).includes(dest.secret));

    const got = await send(ctx, a.key, "GET", `/cdp/destinations/${dest.id}`);
    const gotBody = await got.text();
    assert.equal(got.status, 200);
    assert.ok(!gotBody.includes(dest.secret) && !gotBody.includes("secret"));

    const put = await send(ctx, a.key, "PUT", `/cdp/destinations/${dest.id}`, {
      ...body([vip, lapsed], "https://hooks.example.com/v2"),
      name: "Renamed",
    });
    assert.equal(put.status, 200);
    const updated = await put.json();
    assert.deepEqual(
      [updated.name, updated.url, updated.segments],
      ["Renamed", "https://hooks.example.com/v2", [vip, lapsed]],
    );
    assert.equal(updated.secret, undefined);

    assert.equal((await send(ctx, a.key, "DELETE", `/cdp/destinations/${dest.id}`)).status, 204);
    assert.equal((await send(ctx, a.key, "GET", `/cdp/destinations/${dest.id}`)).status, 404);
    assert.equal((await send(ctx, a.key, "DELETE", `/cdp/destinations/${dest.id}`)).status, 404);
  });
});

Deno.test("destinations: another brand's destination or segment is a 404, like a missing one", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    const vipA = await segment(ctx, a, "VIP");
    const vipB = await segment(ctx, b, "VIP");
    const dest = await (await send(ctx, a.key, "POST", "/cdp/destinations", body([vipA]))).json();

    for (
      const [method, path, payload] of [
        ["GET", `/cdp/destinations/${dest.id}`, undefined],
        ["PUT", `/cdp/destinations/${dest.id}`, body([vipB])],
        ["DELETE", `/cdp/destinations/${dest.id}`, undefined],
        ["POST", `/cdp/destinations/${dest.id}/test`, undefined],
        ["GET", `/cdp/destinations/${dest.id}/deliveries`, undefined],
      ] as const
    ) {
      const res = await send(ctx, b.key, method, path, payload);
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal((await errorBody(res)).error, "not_found");
    }
    assert.equal((await (await send(ctx, b.key, "GET", "/cdp/destinations")).json()).totalSize, 0);
    // A's segment named by B, and B's segment named by A.
    const crossB = await send(ctx, b.key, "POST", "/cdp/destinations", body([vipA]));
    assert.equal(crossB.status, 404);
    const crossA = await send(ctx, a.key, "PUT", `/cdp/destinations/${dest.id}`, body([vipB]));
    assert.equal(crossA.status, 404);
    assert.deepEqual(
      (await (await send(ctx, a.key, "GET", `/cdp/destinations/${dest.id}`)).json()).segments,
      [vipA],
    );
  });
});

Deno.test("destinations: the URL must be https and public; malformed bodies are 400 envelopes", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const vip = await segment(ctx, a, "VIP");
    for (
      const url of [
        "http://hooks.example.com/cdp",
        "https://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[::ffff:192.168.1.1]/hook",
        "https://localhost/hook",
        "https://metadata.google.internal/x",
        "https://user:pw@hooks.example.com/",
        "ftp://hooks.example.com/",
        "not a url",
      ]
    ) {
      const res = await send(ctx, a.key, "POST", "/cdp/destinations", body([vip], url));
      assert.equal(res.status, 400, url);
      assert.equal((await errorBody(res)).error, "bad_request");
    }
    for (
      const bad of [
        { ...body([vip]), type: "email" },
        { ...body([vip]), segments: [] },
        { ...body([vip]), segments: [vip, vip] },
        { ...body([vip]), extra: 1 },
        { name: "x" },
        "[",
      ]
    ) {
      const res = await ctx.request("/cdp/destinations", a.key, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: typeof bad === "string" ? bad : JSON.stringify(bad),
      });
      assert.equal(res.status, 400, JSON.stringify(bad));
      await errorBody(res);
    }
    assert.equal((await (await send(ctx, a.key, "GET", "/cdp/destinations")).json()).totalSize, 0);
  });
});

Deno.test("destinations: a brand has at most MAX_DESTINATIONS_PER_BRAND, also when defined at once", async () => {
  await withContext(async (ctx) => {
    const a = await ctx.seedBrand();
    const b = await ctx.seedBrand();
    const vip = await segment(ctx, a, "VIP");
    const results = await Promise.all(
      Array.from({ length: 5 }, () => send(ctx, a.key, "POST", "/cdp/destinations", body([vip]))),
    );
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 201, 201, 400, 400]);
    const refused = results.find((r) => r.status === 400)!;
    assert.match((await errorBody(refused)).error_description, /at most 3 destinations/);
    // Another brand's cap is its own.
    const vipB = await segment(ctx, b, "VIP");
    assert.equal((await send(ctx, b.key, "POST", "/cdp/destinations", body([vipB]))).status, 201);
  }, { MAX_DESTINATIONS_PER_BRAND: "3" });
});

Deno.test("destinations: test sends a signed POST and reports the answer; http to loopback only when allowed", async () => {
  const receiver = await startReceiver();
  try {
    await withContext(
      async (ctx) => {
        const a = await ctx.seedBrand();
        const vip = await segment(ctx, a, "VIP");
        const dest =
          await (await send(ctx, a.key, "POST", "/cdp/destinations", body([vip], receiver.url)))
            .json();
        receiver.secret = dest.secret;
        // The three tests below share one rate window.
        if (new Date().getUTCSeconds() > 50) {
          await new Promise((resolve) => setTimeout(resolve, 10_000));
        }
        const ok = await send(ctx, a.key, "POST", `/cdp/destinations/${dest.id}/test`);
        assert.equal(ok.status, 200);
        const outcome = await ok.json();
        assert.deepEqual([outcome.ok, outcome.status, outcome.error], [true, 200, null]);
        assert.equal(receiver.received.length, 1);
        const [got] = receiver.received;
        assert.equal(got!.verified, true);
        assert.equal(got!.deliveryId, outcome.deliveryId);
        assert.deepEqual(got!.json, { destination: dest.id, test: true, deliveries: [] });

        receiver.respond = 503;
        const failed = await (await send(ctx, a.key, "POST", `/cdp/destinations/${dest.id}/test`))
          .json();
        assert.deepEqual([failed.ok, failed.status, failed.error], [false, 503, "HTTP 503"]);
        // Over the brand's delivery rate (2 a minute here): 429.
        const throttled = await send(ctx, a.key, "POST", `/cdp/destinations/${dest.id}/test`);
        assert.equal(throttled.status, 429);
        assert.ok(throttled.headers.get("Retry-After"));
        assert.equal(receiver.received.length, 2);
        // Deliveries listing: tests are not recorded.
        const page =
          await (await send(ctx, a.key, "GET", `/cdp/destinations/${dest.id}/deliveries`))
            .json();
        assert.deepEqual([page.list, page.totalSize], [[], 0]);
      },
      { DESTINATIONS_ALLOW_PRIVATE: "true", DESTINATION_RATE_LIMIT_PER_MINUTE: "2" },
      {
        // Signatures carry the wall-clock time the receiver checks against.
        now: () => new Date(),
      },
    );

    await withContext(async (ctx) => {
      const a = await ctx.seedBrand();
      const vip = await segment(ctx, a, "VIP");
      const res = await send(ctx, a.key, "POST", "/cdp/destinations", body([vip], receiver.url));
      assert.equal(res.status, 400);
    });
  } finally {
    await receiver.close();
  }
});

Deno.test("destinations: rotate-secret shows the new secret once; tests then sign with both; bad input is 400, another brand's 404", async () => {
  const receiver = await startReceiver();
  const verify = await documentedVerifier();
  try {
    await withContext(
      async (ctx) => {
        const a = await ctx.seedBrand();
        const b = await ctx.seedBrand();
        const vip = await segment(ctx, a, "VIP");
        const dest =
          await (await send(ctx, a.key, "POST", "/cdp/destinations", body([vip], receiver.url)))
            .json();
        const path = `/cdp/destinations/${dest.id}/rotate-secret`;
        // No body: the replaced secret signs for a day more.
        const res = await ctx.request(path, a.key, { method: "POST" });
        assert.equal(res.status, 200);
        const rotated = await res.json();
        assert.deepEqual([rotated.id, rotated.scope], [dest.id, a.scope]);
        assert.match(rotated.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
        assert.notEqual(rotated.secret, dest.secret);
        const overlap = Date.parse(rotated.previousSecretExpiresAt) - Date.now();
        assert.ok(overlap > 86_000_000 && overlap <= 86_400_000, String(overlap));
        const shown = await (await send(ctx, a.key, "GET", `/cdp/destinations/${dest.id}`)).text();
        assert.ok(!shown.includes(rotated.secret) && !shown.includes(dest.secret));

        // A receiver on either secret accepts the test POST.
        receiver.secret = dest.secret;
        const tested = await send(ctx, a.key, "POST", `/cdp/destinations/${dest.id}/test`);
        assert.equal((await tested.json()).ok, true);
        const got = receiver.received.at(-1)!;
        assert.equal(got.verified, true);
        assert.ok(await verify(rotated.secret, got.body, got.signature));

        const immediate = await send(ctx, a.key, "POST", path, { overlapSeconds: 0 });
        assert.equal(immediate.status, 200);
        const alone = await immediate.json();
        assert.equal(alone.previousSecretExpiresAt, null);
        await send(ctx, a.key, "POST", `/cdp/destinations/${dest.id}/test`);
        const last = receiver.received.at(-1)!;
        assert.ok(await verify(alone.secret, last.body, last.signature));
        assert.equal(await verify(rotated.secret, last.body, last.signature), false);

        for (
          const bad of [
            { overlapSeconds: -1 },
            { overlapSeconds: 604_801 },
            { overlapSeconds: 1.5 },
            { overlapSeconds: "60" },
            { extra: 1 },
            "[",
          ]
        ) {
          const refused = await ctx.request(path, a.key, {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: typeof bad === "string" ? bad : JSON.stringify(bad),
          });
          assert.equal(refused.status, 400, JSON.stringify(bad));
          await errorBody(refused);
        }
        const foreign = await send(ctx, b.key, "POST", path, {});
        assert.equal(foreign.status, 404);
        assert.equal((await errorBody(foreign)).error, "not_found");
        const missing = await ctx.request("/cdp/destinations/dst_none/rotate-secret", a.key, {
          method: "POST",
        });
        assert.equal(missing.status, 404);
        // Neither refusal rotated anything: the last secret still signs.
        await send(ctx, a.key, "POST", `/cdp/destinations/${dest.id}/test`);
        const still = receiver.received.at(-1)!;
        assert.ok(await verify(alone.secret, still.body, still.signature));
      },
      { DESTINATIONS_ALLOW_PRIVATE: "true" },
      // Signatures carry the wall-clock time the receiver checks against.
      { now: () => new Date() },
    );
  } finally {
    await receiver.close();
  }
});

Deno.test("destinations: the routes are in the OpenAPI document", async () => {
  await withContext(async (ctx) => {
    const doc = await (await ctx.request("/openapi.json", null)).json();
    for (
      const path of [
        "/cdp/destinations",
        "/cdp/destinations/{id}",
        "/cdp/destinations/{id}/test",
        "/cdp/destinations/{id}/rotate-secret",
        "/cdp/destinations/{id}/deliveries",
      ]
    ) {
      assert.ok(doc.paths[path], path);
    }
    assert.deepEqual(Object.keys(doc.paths["/cdp/destinations/{id}"]).sort(), [
      "delete",
      "get",
      "put",
    ]);
    assert.ok(doc.paths["/cdp/destinations"].post.responses["201"]);
  });
});
