import assert from "node:assert/strict";
import { erasePixelClaims } from "../../../lib/shopify/pixel_claims.ts";
import { freshDatabase, testClock } from "../../test_support.ts";

const A = "acme.myshopify.com";
const B = "other.myshopify.com";

Deno.test("erasePixelClaims: the claims made by, resolved to or naming the person go; others stay", async () => {
  const db = await freshDatabase();
  const at = testClock().now();
  try {
    const claim = (
      scope: string,
      order: string,
      client: string,
      email: string | null,
      profile: string | null,
    ) =>
      db.sql`
        insert into pixel_claims (scope, order_id, client_id, email, claimed_at, expires_at, status,
                                  profile_id)
        values (${scope}, ${order}, ${client}, ${email}, ${at}, ${at},
                ${profile ? "merged" : "pending"}, ${profile})`;
    await claim(A, "1001", "client-1", null, "cust-1"); // resolved to the person
    await claim(A, "1002", "client-2", "ann@example.com", null); // naming their email
    await claim(A, "1003", "anon-1", null, null); // made by an id merged into them
    await claim(A, "1004", "client-9", "bob@example.com", null); // someone else
    await claim(B, "1001", "client-1", "ann@example.com", "cust-1"); // another brand
    const counts = await db.sql.begin((tx) =>
      erasePixelClaims(tx, {
        scope: A,
        profileIds: ["cust-1", "anon-1"],
        emails: ["Ann@Example.com"],
      })
    );
    assert.deepEqual(counts, { claims: 3 });
    const left = await db.sql<{ scope: string; order_id: string }[]>`
      select scope, order_id from pixel_claims order by scope, order_id`;
    assert.deepEqual(left.map((r) => `${r.scope} ${r.order_id}`), [`${A} 1004`, `${B} 1001`]);
  } finally {
    await db.close();
  }
});
