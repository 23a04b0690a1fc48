import assert from "node:assert/strict";
import { DomainError } from "../../../lib/errors.ts";
import { createShopifyAdmin } from "../../../lib/shopify/admin_client.ts";
import {
  awaitBulkOperation,
  requireCompleted,
  startBulkQuery,
} from "../../../lib/shopify/bulk_operation.ts";
import { ordersBulkQuery } from "../../../lib/shopify/bulk_mapping.ts";
import { type FakeBulkApi, startFakeBulkApi } from "./fake_bulk_api.ts";

const SHOP = "bulk.myshopify.com";
const TOKEN = "shpat_bulk";
const credentials = { shop: SHOP, accessToken: TOKEN };

async function withFake(
  fn: (fake: FakeBulkApi, client: ReturnType<typeof createShopifyAdmin>) => Promise<void>,
) {
  const fake = startFakeBulkApi(TOKEN);
  try {
    await fn(fake, createShopifyAdmin({ adminOrigin: fake.origin, apiVersion: fake.apiVersion }));
    assert.deepEqual(fake.violations, []);
  } finally {
    await fake.close();
  }
}

Deno.test("bulk operation: run, then poll with a capped backoff until COMPLETED", async () => {
  await withFake(async (fake, client) => {
    fake.pollsUntilDone = 6;
    const started = await startBulkQuery(client, credentials, ordersBulkQuery("2025-01-01"));
    assert.equal(started.status, "CREATED");
    assert.match(fake.requests[0]!.query!, /orders\(query: "created_at:>=2025-01-01"\)/);
    const sleeps: number[] = [];
    const statuses: string[] = [];
    const op = await awaitBulkOperation(client, credentials, started.id, {
      firstDelayMs: 100,
      maxDelayMs: 300,
      sleep: (ms) => Promise.resolve(void sleeps.push(ms)),
      onPoll: (seen) => statuses.push(seen.status),
    });
    assert.equal(op.status, "COMPLETED");
    assert.equal(op.id, started.id);
    assert.match(op.url!, /^http:\/\/127\.0\.0\.1:\d+\/bulk\/\d+\.jsonl$/);
    assert.equal(op.objectCount, 7000);
    assert.deepEqual(statuses, [...Array(6).fill("RUNNING"), "COMPLETED"]);
    assert.deepEqual(sleeps, [100, 150, 225, 300, 300, 300]);
    assert.equal(requireCompleted(op), op);
  });
});

Deno.test("bulk operation: a userError is reported with Shopify's words, not retried", async () => {
  await withFake(async (fake, client) => {
    await startBulkQuery(client, credentials, ordersBulkQuery(null));
    // The first is still running: Shopify refuses a second.
    await assert.rejects(
      () => startBulkQuery(client, credentials, ordersBulkQuery(null)),
      (err: unknown) =>
        err instanceof DomainError && err.kind === "conflict" &&
        /already in progress: gid:\/\/shopify\/BulkOperation\/\d+/.test(err.message),
    );
    assert.equal(fake.requests.filter((r) => r.operation === "run").length, 2);
  });
});

Deno.test("bulk operation: FAILED ends the wait and is an error naming its errorCode", async () => {
  await withFake(async (fake, client) => {
    fake.outcomes.push({ status: "FAILED", errorCode: "INTERNAL_SERVER_ERROR" });
    const started = await startBulkQuery(client, credentials, ordersBulkQuery(null));
    const op = await awaitBulkOperation(client, credentials, started.id, {
      sleep: () => Promise.resolve(),
    });
    assert.equal(op.status, "FAILED");
    assert.equal(op.errorCode, "INTERNAL_SERVER_ERROR");
    assert.equal(op.url, null);
    assert.throws(
      () => requireCompleted(op),
      (err: unknown) =>
        err instanceof DomainError && err.kind === "upstream_failed" &&
        err.message === `bulk operation ${op.id} ended FAILED (INTERNAL_SERVER_ERROR)`,
    );
  });
});

Deno.test("bulk operation: a wait past its deadline gives up; a wrong token is forbidden", async () => {
  await withFake(async (fake, client) => {
    fake.pollsUntilDone = 1_000;
    const started = await startBulkQuery(client, credentials, ordersBulkQuery(null));
    await assert.rejects(
      () =>
        awaitBulkOperation(client, credentials, started.id, {
          firstDelayMs: 60_000,
          deadlineMs: 1_000,
          sleep: () => Promise.resolve(),
        }),
      (err: unknown) => err instanceof DomainError && err.kind === "unavailable",
    );
    await assert.rejects(
      () => startBulkQuery(client, { shop: SHOP, accessToken: "wrong" }, ordersBulkQuery(null)),
      (err: unknown) =>
        err instanceof DomainError && err.kind === "forbidden" &&
        /read_all_orders/.test(err.message),
    );
    fake.violations.length = 0;
  });
});
