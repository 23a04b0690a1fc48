/**
 * What the delivery tests share: a brand with segments and a destination pointing at a real
 * receiver, changes appended to the log as the membership writer appends them, and the delivery
 * dependencies on the wall clock (signatures are checked against it).
 *
 * @module
 */
import { monotonicFactory } from "ulid";
import { appendChanges } from "../../../lib/audiences/changes.ts";
import type { DeliveryDeps } from "../../../lib/audiences/delivery.ts";
import { createDestination } from "../../../lib/audiences/destinations.ts";
import { createSegment, segmentId } from "../../../lib/engine/segments.ts";
import type { DestinationSettings } from "../../../lib/config.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { lazyTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { type TestContext, withContext } from "../../test_support.ts";
import { type Receiver, startReceiver } from "./webhook_receiver.ts";

/** Settings for tests: private addresses allowed, quick retries. */
export const TEST_SETTINGS: DestinationSettings = {
  allowPrivate: true,
  maxPerBrand: 20,
  ratePerMinute: 10_000,
  timeoutMs: 2_000,
  retryMs: 86_400_000,
  backoffMs: 50,
  pollMs: 50,
};

/** Delivery dependencies over `sql` and `kv`, on the wall clock. */
export function deliveryDeps(
  sql: Sql,
  kv: Deno.Kv,
  settings: Partial<DestinationSettings> = {},
): DeliveryDeps {
  return {
    sql,
    kv,
    now: () => new Date(),
    newId: monotonicFactory(),
    settings: { ...TEST_SETTINGS, ...settings },
    cipher: lazyTokenCipher(kv, undefined),
  };
}

/** Defines segments of `scope` by name; answers their ids. */
export async function defineSegments(sql: Sql, scope: string, names: string[]): Promise<string[]> {
  const ids = [];
  for (const name of names) {
    const segment = await createSegment(sql, {
      scope,
      id: segmentId(scope, name),
      name,
      condition: {
        type: "profilePropertyCondition",
        parameterValues: { propertyName: "properties.vip", comparisonOperator: "exists" },
      },
      now: new Date(),
    });
    ids.push(segment.id);
  }
  return ids;
}

/** A destination of the brand's `segments` at `url`; answers its id and secret. */
export async function defineDestination(
  deps: DeliveryDeps,
  brand: { brandId: string; scope: string },
  segments: string[],
  url: string,
): Promise<{ id: string; secret: string }> {
  const created = await createDestination(deps, brand, { name: "Hook", url, segments });
  return { id: created.id, secret: created.secret };
}

/** Appends entries (`+p1`) and exits (`-p1`) of one segment to the log, in one transaction. */
export async function logChanges(
  sql: Sql,
  scope: string,
  segment: string,
  changes: string[],
): Promise<void> {
  await sql.begin((tx) =>
    appendChanges(
      tx,
      scope,
      changes.map((c) => ({
        segmentId: segment,
        profileId: c.slice(1),
        change: c.startsWith("+") ? "entered" as const : "exited" as const,
        at: new Date(),
      })),
    )
  );
}

/** What {@linkcode withDestination} hands a test. */
export interface DestinationFixture {
  ctx: TestContext;
  deps: DeliveryDeps;
  brand: { brandId: string; scope: string; key: string };
  /** The destination's one segment. */
  segment: string;
  destination: { id: string; secret: string };
  /** The destination's receiver, checking signatures with its secret. */
  receiver: Receiver;
}

/**
 * Runs `fn` over a test context holding a brand with a segment `VIP` and a destination of it
 * pointing at a fresh receiver; delivery settings from `settings`. Closes everything after.
 */
export async function withDestination(
  fn: (fixture: DestinationFixture) => Promise<void>,
  settings: Partial<DestinationSettings> = {},
  env: Record<string, string> = {},
): Promise<void> {
  const receiver = await startReceiver();
  try {
    await withContext(async (ctx) => {
      const seeded = await ctx.seedBrand({ name: "Acme" });
      const brand = { brandId: seeded.brandId, scope: seeded.scope!, key: seeded.key };
      const deps = deliveryDeps(ctx.sql, ctx.kv, settings);
      const [segment] = await defineSegments(ctx.sql, brand.scope, ["VIP"]);
      const destination = await defineDestination(deps, brand, [segment!], receiver.url);
      receiver.secret = destination.secret;
      await fn({ ctx, deps, brand, segment: segment!, destination, receiver });
    }, env);
  } finally {
    await receiver.close();
  }
}
