import assert from "node:assert/strict";
import {
  exportFieldsSql,
  exportLine,
  exportLineSql,
  exportPredictionsSql,
  type ExportRow,
} from "../../../lib/engine/export_lines.ts";
import { freshDatabase } from "../../test_support.ts";

Deno.test("exportLine: id, provenance, present identity fields, visit dates", () => {
  assert.deepEqual(
    exportLine({
      item_id: "x",
      provenance: "merged",
      properties: {
        email: "x@example.com",
        firstName: null,
        zipCode: "75001",
        age: 3,
        mergeIdentifier: "m",
      },
      first_visit: new Date("2026-01-01T00:00:00Z"),
      last_visit: null,
    }),
    {
      id: "x",
      provenance: "merged",
      email: "x@example.com",
      zipCode: "75001",
      mergeIdentifier: "m",
      properties: { firstVisit: "2026-01-01T00:00:00.000Z" },
    },
  );
});

// [id, properties as JSON text, first visit, last visit, whether the database writes the line].
const ROWS: [string, string, string | null, string | null, boolean][] = [
  ["plain", '{"email": "a@b.example", "firstName": "Ann", "age": 3}', null, null, true],
  [
    "dates",
    '{"city": "Paris"}',
    "2026-01-01T00:00:00.123456Z",
    "2026-02-01T10:11:12.999999Z",
    true,
  ],
  ["old", "{}", "1000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", true],
  ["offset", "{}", "2026-06-01T12:00:00+05:30", null, true],
  // Escapes: quotes, backslashes, control characters, DEL, non-ASCII, U+2028, astral.
  [
    'quo"te\\',
    String.raw`{"email": "q\"b\\s/\b\f\n\r\t\u0001\u001f\u007f", "city": "Éve \u2028 😀"}`,
    null,
    null,
    true,
  ],
  ["booleans", '{"email": true, "city": false, "zipCode": null}', null, null, true],
  ["integers", '{"zipCode": 75001, "phoneNumber": -0, "city": 123456789012345}', null, null, true],
  ["big", '{"zipCode": 1234567890123456}', null, null, false],
  ["fraction", '{"zipCode": 1.50}', null, null, false],
  ["exponent", '{"zipCode": 1e2}', null, null, true],
  ["object", '{"city": {"name": "Paris", "x": null}}', null, null, false],
  ["array", '{"email": ["a@b.example"]}', null, null, false],
  ["nested only elsewhere", '{"tags": [1, {"a": 1.50}], "email": "e"}', null, null, true],
  ["not an object", '["email"]', null, null, true],
  ["a string", '"email"', null, null, true],
  ["year 999", "{}", "0999-12-31T00:00:00Z", null, false],
  ["year 10000", "{}", null, "10000-01-01T00:00:00Z", false],
  [
    "every field",
    JSON.stringify({
      email: "e",
      phoneNumber: "p",
      firstName: "f",
      lastName: "l",
      city: "c",
      countryName: "n",
      zipCode: "z",
      shopDomain: "s",
      shopifyCustomerId: "i",
      mergeIdentifier: "m",
      other: "o",
    }),
    "2026-01-01T00:00:00Z",
    "2026-01-02T00:00:00Z",
    true,
  ],
];

Deno.test("exportLineSql: the database writes JSON.stringify(exportLine(row)) byte for byte, or NULL", async () => {
  const db = await freshDatabase();
  try {
    const { sql } = db;
    for (const [id, properties, firstVisit, lastVisit] of ROWS) {
      await sql`
        insert into profiles (scope, item_id, properties, provenance, first_visit, last_visit,
                              created_at, updated_at)
        values ('s', ${id}, ${properties}::text::jsonb, ${"server"}, ${firstVisit}::text::timestamptz,
                ${lastVisit}::text::timestamptz, now(), now())`;
    }
    const rows = await sql<(ExportRow & { line: string | null })[]>`
      select p.item_id, p.provenance, p.properties, p.first_visit, p.last_visit,
             ${exportLineSql(sql)} as line
      from profiles p, ${exportFieldsSql(sql)}
      where p.scope = 's'`;
    assert.equal(rows.length, ROWS.length);
    for (const [id, , , , written] of ROWS) {
      const row = rows.find((r) => r.item_id === id)!;
      if (!written) {
        assert.equal(row.line, null, id);
        continue;
      }
      assert.equal(row.line, JSON.stringify(exportLine(row)), id);
    }
  } finally {
    await db.close();
  }
});

Deno.test("exportLineSql: a profile's predictions close its line, byte for byte as exportLine writes them", async () => {
  const db = await freshDatabase();
  try {
    const { sql } = db;
    // [id, properties, p_alive, expected_orders_365d, predicted_clv_365d as inserted].
    const cases: [string, string, string, string, string][] = [
      ["half", '{"email": "a@b.example"}', "0.5000", "1.2300", "12.3"],
      ["one", "{}", "1", "0", "0"],
      ["tiny", "{}", "0.0001", "0.0010", "1234.5"],
      ["long", "{}", "0.9999", "123456.7891", "99999999.99"],
      // The database does not write this one (a fraction in an identity field): exportLine does.
      ["fallback", '{"zipCode": 1.50}', "0.25", "2", "3.10"],
    ];
    for (const [id, properties, pAlive, orders, clv] of cases) {
      await sql`
        insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
        values ('s', ${id}, ${properties}::text::jsonb, 'server', now(), now())`;
      await sql`
        insert into profile_predictions (scope, profile_id, p_alive, expected_orders_90d,
          expected_orders_365d, predicted_clv_365d, model, fitted_at)
        values ('s', ${id}, ${pAlive}::numeric, 0, ${orders}::numeric, ${clv}::numeric,
                'bgnbd', now())`;
    }
    await sql`
      insert into profiles (scope, item_id, properties, provenance, created_at, updated_at)
      values ('s', 'none', '{}', 'server', now(), now())`;
    const rows = await sql<(ExportRow & { line: string | null })[]>`
      select p.item_id, p.provenance, p.properties, p.first_visit, p.last_visit,
             ${exportLineSql(sql)} as line, ${exportPredictionsSql(sql)} as predictions
      from profiles p, ${exportFieldsSql(sql)}
      where p.scope = 's'
      order by p.item_id`;
    const lines = Object.fromEntries(
      rows.map((row) => [row.item_id, row.line ?? JSON.stringify(exportLine(row))]),
    );
    for (const row of rows) {
      if (row.line !== null) assert.equal(row.line, JSON.stringify(exportLine(row)), row.item_id);
    }
    assert.equal(rows.find((r) => r.item_id === "fallback")!.line, null);
    assert.equal(
      lines.half,
      '{"id":"half","provenance":"server","email":"a@b.example","properties":{},' +
        '"predictions":{"p_alive":0.5,"predicted_clv_365d":"12.30","expected_orders_365d":1.23}}',
    );
    assert.equal(
      lines.tiny,
      '{"id":"tiny","provenance":"server","properties":{},' +
        '"predictions":{"p_alive":0.0001,"predicted_clv_365d":"1234.50","expected_orders_365d":0.001}}',
    );
    assert.equal(
      lines.fallback,
      '{"id":"fallback","provenance":"server","zipCode":1.5,"properties":{},' +
        '"predictions":{"p_alive":0.25,"predicted_clv_365d":"3.10","expected_orders_365d":2}}',
    );
    // Without predictions, the line is what it always was.
    assert.equal(lines.none, '{"id":"none","provenance":"server","properties":{}}');
    assert.equal(rows.find((r) => r.item_id === "none")!.predictions, null);
  } finally {
    await db.close();
  }
});
