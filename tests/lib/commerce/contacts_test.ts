import assert from "node:assert/strict";
import { normalizeEmail, normalizePhone } from "../../../lib/commerce/contacts.ts";

Deno.test("normalizeEmail: trimmed and lower-cased; not an address is null", () => {
  assert.equal(normalizeEmail("  Bob@Example.COM "), "bob@example.com");
  assert.equal(normalizeEmail("bob"), null);
  assert.equal(normalizeEmail(""), null);
  assert.equal(normalizeEmail(null), null);
});

Deno.test("normalizePhone: E.164 from common international spellings; ambiguous is null", () => {
  for (
    const input of [
      "+1 613 555 1111",
      "+1-613-555-1111",
      "(+1) 613.555.1111",
      "0016135551111",
      "+16135551111",
    ]
  ) {
    assert.equal(normalizePhone(input), "+16135551111", input);
  }
  assert.equal(normalizePhone("+44 20 7946 0958"), "+442079460958");
  for (
    const input of ["613-555-1111", "+0 123 456 789", "+1 555", "+1 613 555 1111 ext 2", "", null]
  ) {
    assert.equal(normalizePhone(input), null, String(input));
  }
});
