import assert from "node:assert/strict";
import { profileConsentGranted } from "../../../lib/privacy/consent.ts";
import { withBrandDatabase } from "../../test_support.ts";

Deno.test("profileConsentGranted: only profiles of the scope with the type granted and not revoked by now", async () => {
  await withBrandDatabase(async (sql) => {
    const now = new Date("2026-11-21T12:00:00Z");
    const entry = (status: string, revokeDate: string | null = null) => ({
      newsletter: { typeIdentifier: "newsletter", status, statusDate: "2026-11-01", revokeDate },
    });
    const profiles: [string, string, unknown][] = [
      ["b.myshopify.com", "granted", entry("GRANTED")],
      ["b.myshopify.com", "later", entry("GRANTED", "2027-01-01T00:00:00Z")],
      ["b.myshopify.com", "expired", entry("GRANTED", "2026-11-01T00:00:00Z")],
      ["b.myshopify.com", "denied", entry("DENIED")],
      ["b.myshopify.com", "none", {}],
      ["other.myshopify.com", "granted2", entry("GRANTED")],
    ];
    for (const [scope, id, consents] of profiles) {
      await sql`
        insert into profiles (scope, item_id, properties, consents, provenance, created_at, updated_at)
        values (${scope}, ${id}, '{}', ${sql.json(consents as never)}, 'server', ${now}, ${now})`;
    }
    const ids = profiles.map(([, id]) => id);
    const granted = await profileConsentGranted(sql, "b.myshopify.com", ids, "newsletter", now);
    assert.deepEqual([...granted].sort(), ["granted", "later"]);
    assert.deepEqual(
      [...await profileConsentGranted(sql, "b.myshopify.com", ids, "sms", now)],
      [],
    );
    assert.deepEqual(
      [...await profileConsentGranted(sql, "b.myshopify.com", [], "newsletter", now)],
      [],
    );
  });
});
