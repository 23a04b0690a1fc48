/**
 * Random conditions from the whole vocabulary, with edge values (window edges, huge and tiny
 * numbers, numeric-looking text, long and non-ASCII strings, costly patterns, deep nesting):
 * whatever validates must compile and run on PostgreSQL, as a count and as one profile's
 * membership. A fixed seed keeps a failure reproducible.
 */
import assert from "node:assert/strict";
import {
  compileCondition,
  MAX_CONDITION_DEPTH,
  validateCondition,
} from "../../../lib/engine/conditions.ts";
import { OPERATORS, VALUE_PARAMS } from "../../../lib/engine/conditions/vocabulary.ts";
import {
  type Aggregate,
  aggregate,
  metrics,
  withQueryBudget,
} from "../../../lib/engine/queries.ts";
import { DomainError } from "../../../lib/errors.ts";
import { toHttpError } from "../../../lib/http/errors.ts";
import type { Sql } from "../../../lib/store/db.ts";
import { freshDatabase } from "../../test_support.ts";

const SCOPE = "fuzz.myshopify.com";
const NOW = new Date("2026-11-21T12:00:00.000Z");

function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
}

const EDGE_VALUES: unknown[] = [
  "",
  "x",
  "é🎉中",
  "a".repeat(5000),
  "NaN",
  "Infinity",
  "-0",
  "1e308",
  "1e-400",
  "0x10",
  "  5 ",
  "9999-12-31",
  "0001-01-01",
  "9999-12-31T23:59:59.999Z",
  "9999-12-31T23:00:00-05:00",
  "0001-01-01T00:00:00+01:00",
  "0000-01-01",
  "253402300799999",
  "-62135596800000",
  "now",
  "now+7973y",
  "now-2025y/y",
  "9999-12-31||/d",
  "9999-12-31||+1d",
  "(.?){255}",
  "(.?){100}",
  ".{0,255}",
  "[^x]{255}",
  "(?<=a)b",
  "2026-02-29",
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  5e-324,
  Number.MAX_SAFE_INTEGER,
  253402300799999,
  8.64e15,
  true,
  null,
  [],
  {},
];

const EVENT_NAMES = [
  "properties.total",
  "flattenedProperties.channel",
  "timeStamp",
  "eventType",
  "target.itemId",
  "target.properties.pagePath",
];

function pickOf<T>(next: () => number, items: readonly T[]): T {
  return items[Math.floor(next() * items.length)]!;
}

const NAMES = [
  "properties.a",
  "properties.n",
  "properties.d",
  "properties.list",
  "itemId",
  "properties.firstVisit",
  "properties.nbOfVisits",
];

function generate(next: () => number, depth: number): unknown {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const roll = next();
  if (depth < MAX_CONDITION_DEPTH && roll < 0.25) {
    const count = 1 + Math.floor(next() * 3);
    return {
      type: "booleanCondition",
      parameterValues: {
        operator: pick(["and", "or"]),
        subConditions: Array.from({ length: count }, () => generate(next, depth + 1)),
      },
    };
  }
  if (depth < MAX_CONDITION_DEPTH && roll < 0.32) {
    return { type: "notCondition", parameterValues: { subCondition: generate(next, depth + 1) } };
  }
  if (depth < MAX_CONDITION_DEPTH && roll < 0.38) {
    return {
      type: "pastEventCondition",
      parameterValues: {
        eventCondition: {
          type: "eventPropertyCondition",
          parameterValues: property(next, pick(["properties.total", "timeStamp", "eventType"])),
        },
        ...(next() < 0.5 ? { fromDate: pick(EDGE_VALUES) } : {}),
        ...(next() < 0.3 ? { toDate: pick(EDGE_VALUES) } : {}),
        ...(next() < 0.3 ? { minimumEventCount: pick([0, 1, 2, 1_000_000]) } : {}),
        ...(next() < 0.2 ? { maximumEventCount: pick([0, 1, 1_000_000]) } : {}),
      },
    };
  }
  if (roll < 0.43) {
    const field = pick(["timeStamp", "lastEventDate", "size", "duration", "itemId"]);
    return { type: "sessionPropertyCondition", parameterValues: property(next, field) };
  }
  return { type: "profilePropertyCondition", parameterValues: property(next, pick(NAMES)) };
}

// Values of each kind, edges first: most random conditions then validate.
const BY_KIND: Record<string, unknown[]> = {
  string: ["", "x", "é🎉中", "a".repeat(5000), "NaN", "(.?){100}", ".{0,255}", "[^x]{255}", "a|"],
  integer: [0, -1, "25", Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, "9999999999999999"],
  double: [1.5, 1e308, -1e308, 5e-324, "1e-400", "-1.5e2", "1e308"],
  date: [
    "9999-12-31",
    "0001-01-01",
    "9999-12-31T23:59:59.999Z",
    "253402300799999",
    0,
    "2024-02-29",
  ],
  dateExpr: ["now", "now+7973y", "now-2025y/y", "9999-12-31||/d", "0001-01-01||/y", "now/w"],
};

function property(next: () => number, propertyName: string): Record<string, unknown> {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const operator = pick([...OPERATORS.keys()]);
  const key = pick([...VALUE_PARAMS.keys()]);
  const { plural, kind } = VALUE_PARAMS.get(key)!;
  const one = () => next() < 0.8 ? pick(BY_KIND[kind]!) : pick(EDGE_VALUES);
  const value = plural
    ? Array.from({ length: operator === "between" ? 2 : 1 + Math.floor(next() * 3) }, one)
    : one();
  return { propertyName, comparisonOperator: operator, [key]: value };
}

/** Two profiles and an event holding values at the edges of what each type stores. */
async function seed(sql: Sql): Promise<void> {
  const edgeProperties = {
    a: "9999-12-31T23:59:59Z",
    n: 1e308,
    d: "0001-01-01",
    list: ["9999-12-31T23:00:00-05:00", -1e308, "é🎉", null, [1], { x: 1 }],
  };
  await sql`
    insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                          nb_of_visits, created_at, updated_at)
    values (${SCOPE}, 'p1', ${sql.json(edgeProperties)}, 'server',
            '0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z', 2147483647, now(), now()),
           (${SCOPE}, 'p2', '{}', 'server', null, null, 0, now(), now())`;
  await sql`
    insert into events (scope, id, profile_id, session_id, event_type, time_stamp, properties,
                        flattened_properties, source, received_at)
    values (${SCOPE}, 'e1', 'p1', 's', 'order_created', '9999-12-31T23:59:59Z',
            '{"total": 1e308}', '{}', 'server', now())`;
}

Deno.test("conditions fuzz: every random condition that validates compiles and runs", async () => {
  const db = await freshDatabase();
  const sql = db.sql;
  try {
    await seed(sql);
    const next = random(20261121);
    let ran = 0;
    for (let i = 0; i < 800; i++) {
      const raw = generate(next, 1);
      const checked = validateCondition(raw, { itemType: "profile", now: NOW });
      if (!checked.ok) continue;
      for (const single of [false, true]) {
        const fragment = compileCondition(sql, checked.tree, {
          itemType: "profile",
          scope: SCOPE,
          single,
        });
        try {
          await sql.begin(async (tx) => {
            await tx`select set_config('statement_timeout', '5000', true)`;
            await tx`
              select count(*) from profiles p where p.scope = ${SCOPE}
                ${single ? tx`and p.item_id = 'p1'` : tx``} and ${fragment}`;
          });
        } catch (err) {
          // A budget timeout is allowed; anything else is a condition that validated and failed.
          if ((err as { code?: string }).code === "57014") continue;
          assert.fail(`${JSON.stringify(raw)} validated but failed: ${err}`);
        }
      }
      ran++;
    }
    assert.ok(ran > 100, `only ${ran} random conditions validated`);
    // Event conditions over events, on event fields.
    let events = 0;
    for (let i = 0; i < 300; i++) {
      const raw = {
        type: "eventPropertyCondition",
        parameterValues: property(next, pickOf(next, EVENT_NAMES)),
      };
      const checked = validateCondition(raw, { itemType: "event", now: NOW });
      if (!checked.ok) continue;
      const fragment = compileCondition(sql, checked.tree, { itemType: "event", scope: SCOPE });
      try {
        await sql`select count(*) from events e where e.scope = ${SCOPE} and ${fragment}`;
      } catch (err) {
        assert.fail(`${JSON.stringify(raw)} validated but failed: ${err}`);
      }
      events++;
    }
    assert.ok(events > 50, `only ${events} random event conditions validated`);
  } finally {
    await db.close();
  }
});

Deno.test("conditions fuzz: random aggregates and metrics answer or refuse with 400, never fail", async () => {
  const db = await freshDatabase();
  const sql = db.sql;
  try {
    await seed(sql);
    const next = random(4242);
    const intervals = ["1d", "month", "constructor", "toString", "valueOf", "__proto__", "", "1q"];
    const bounds: unknown[] = [...EDGE_VALUES, ...BY_KIND.date!, ...BY_KIND.dateExpr!];
    for (let i = 0; i < 150; i++) {
      const type = pickOf(next, ["date", "dateRange", "numericRange"] as const);
      const spec: Aggregate = type === "date"
        ? { type, interval: pickOf(next, intervals), format: "yyyy-MM-dd" }
        : {
          type,
          ranges: [{
            from: pickOf(next, bounds) as number | string | null,
            to: pickOf(next, bounds) as number | string | null,
          }],
        };
      const property = pickOf(next, ["properties.d", "properties.n", "properties.list"]);
      try {
        await withQueryBudget(sql, 5000, (tx) =>
          aggregate(tx, {
            itemType: "profile",
            scope: SCOPE,
            property,
            aggregate: spec,
            condition: null,
            now: NOW,
          }));
        await withQueryBudget(sql, 5000, (tx) =>
          metrics(tx, {
            itemType: "profile",
            scope: SCOPE,
            property,
            metrics: ["sum", "avg", "min", "max"],
            condition: null,
            now: NOW,
          }));
      } catch (err) {
        const refused = err instanceof DomainError && toHttpError(err).status === 400;
        assert.ok(refused, `${JSON.stringify(spec)} on ${property} failed: ${err}`);
      }
    }
  } finally {
    await db.close();
  }
});

/** A random pattern of the regex grammar, weighted towards what PostgreSQL finds costly. */
function randomPattern(next: () => number, depth: number): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const count = () => pick([1, 2, 3, 10, 20, 64, 100, 128, 200, 255]);
  const quantifiers = [
    () => "",
    () => "?",
    () => "*",
    () => "+",
    () => `{${count()}}`,
    () => `{0,${count()}}`,
    () => `{${count()},}`,
    () => `{${Math.min(count(), 10)},${count() + 10}}`,
  ];
  let out = "";
  for (let i = 1 + Math.floor(next() * 4); i > 0; i--) {
    const atom = depth > 0 && next() < 0.4
      ? `${pick(["(", "(?:"])}${randomPattern(next, depth - 1)}${
        next() < 0.3 ? `|${randomPattern(next, depth - 1)}` : ""
      })`
      : pick([".", "a", "\\w", "[a-z]", "\\d", "[^x]", "[a-zA-Z0-9_.+-]", "é"]);
    out += atom + pick(quantifiers)();
  }
  return out;
}

Deno.test("conditions fuzz: every random pattern the regex rules accept compiles on PostgreSQL", async () => {
  const db = await freshDatabase();
  const sql = db.sql;
  try {
    const next = random(7);
    let accepted = 0;
    for (let i = 0; i < 1500 && accepted < 250; i++) {
      const pattern = randomPattern(next, 3);
      const raw = {
        type: "profilePropertyCondition",
        parameterValues: {
          propertyName: "properties.a",
          comparisonOperator: "matchesRegex",
          propertyValue: pattern,
        },
      };
      if (!validateCondition(raw, { itemType: "profile" }).ok) continue;
      accepted++;
      // Exactly the text the compiler matches with (anchored like Lucene).
      try {
        await sql`select ${"abc"}::text ~ ${`^(?:${pattern})$`}::text`;
      } catch (err) {
        assert.fail(`${pattern} was accepted but PostgreSQL refused it: ${err}`);
      }
    }
    assert.ok(accepted >= 100, `only ${accepted} random patterns accepted`);
  } finally {
    await db.close();
  }
});
