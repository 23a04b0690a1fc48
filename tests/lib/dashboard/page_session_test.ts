import assert from "node:assert/strict";
import {
  checkCsrfToken,
  csrfToken,
  mintPageToken,
  PAGE_SESSION_TTL_MS,
  pageSessionKey,
  readPageToken,
} from "../../../lib/dashboard/page_session.ts";

const now = new Date("2026-11-21T12:00:00Z");
const input = { shop: "a.myshopify.com", brandId: "01BRAND", now };

Deno.test("page session: a minted token reads back until it expires", async () => {
  const key = await pageSessionKey("secret");
  const { token, session } = await mintPageToken(key, input);
  assert.deepEqual(await readPageToken(key, token, now), session);
  assert.equal(session.expiresAt.getTime(), now.getTime() + PAGE_SESSION_TTL_MS);
  const late = new Date(now.getTime() + PAGE_SESSION_TTL_MS);
  assert.equal(await readPageToken(key, token, late), null);
});

Deno.test("page session: another secret, a changed payload or garbage reads as null", async () => {
  const key = await pageSessionKey("secret");
  const { token } = await mintPageToken(key, input);
  assert.equal(await readPageToken(await pageSessionKey("other"), token, now), null);
  const [payload, signature] = token.split(".") as [string, string];
  const other = btoa(JSON.stringify({ s: "b.myshopify.com", b: "01OTHER", e: 2e9, n: "x" }))
    .replaceAll("=", "");
  assert.equal(await readPageToken(key, `${other}.${signature}`, now), null);
  assert.equal(await readPageToken(key, `${payload}.${"A".repeat(43)}`, now), null);
  for (const junk of ["", ".", "a.b", `${payload}.`, `${token}x`]) {
    assert.equal(await readPageToken(key, junk, now), null, junk);
  }
});

Deno.test("page session: the CSRF token is the session's own", async () => {
  const key = await pageSessionKey("secret");
  const one = await mintPageToken(key, input);
  const two = await mintPageToken(key, input);
  const csrf = await csrfToken(key, one.session);
  assert.equal(await checkCsrfToken(key, one.session, csrf), true);
  assert.equal(await checkCsrfToken(key, two.session, csrf), false);
  assert.equal(await checkCsrfToken(key, one.session, ""), false);
  assert.equal(await checkCsrfToken(key, one.session, one.token), false);
});
