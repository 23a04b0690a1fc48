import assert from "node:assert/strict";
import {
  exportFieldsSql,
  exportLine,
  exportLineSql,
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
