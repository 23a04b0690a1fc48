/**
 * The dashboard's page session: a signed, short-lived page token carried in every link and form
 * of the `/app` pages, bound to one shop and its brand, and the CSRF token of its forms.
 *
 * A token in links rather than a cookie: inside the Shopify admin the pages load in a
 * third-party iframe, where browsers block (Safari) or partition (Chrome) cookies, so a cookie
 * session would not survive the next click everywhere. The token is an HMAC over its claims with
 * a key derived from the app secret; pages send `Referrer-Policy: no-referrer` so it does not
 * leave in a `Referer` header. Docs: docs/dashboard.md.
 *
 * @module
 */

/** What a valid page token says. */
export interface PageSession {
  shop: string;
  brandId: string;
  expiresAt: Date;
  /** Random per session: the CSRF token is derived from it. */
  nonce: string;
}

/** How long a page session lasts; past it the merchant reopens the app from the admin. */
export const PAGE_SESSION_TTL_MS = 15 * 60_000;

/** The signing key of page tokens and CSRF tokens. */
export type PageSessionKey = CryptoKey;

const _encoder = new TextEncoder();

/** Derives the page-session key from the app secret (a key of its own, not the secret itself). */
export async function pageSessionKey(appSecret: string): Promise<PageSessionKey> {
  const root = await crypto.subtle.importKey(
    "raw",
    _encoder.encode(appSecret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const derived = await crypto.subtle.sign("HMAC", root, _encoder.encode("cdp dashboard v1"));
  return await crypto.subtle.importKey(
    "raw",
    derived,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign", "verify"],
  );
}

/** Mints a page token for the shop's brand, valid for {@linkcode PAGE_SESSION_TTL_MS}. */
export async function mintPageToken(
  key: PageSessionKey,
  input: { shop: string; brandId: string; now: Date },
): Promise<{ token: string; session: PageSession }> {
  const nonce = _toBase64Url(crypto.getRandomValues(new Uint8Array(12)));
  const exp = Math.floor(input.now.getTime() / 1000) + PAGE_SESSION_TTL_MS / 1000;
  const payload = _toBase64Url(
    _encoder.encode(JSON.stringify({ s: input.shop, b: input.brandId, e: exp, n: nonce })),
  );
  const signature = await _sign(key, `page|${payload}`);
  return {
    token: `${payload}.${signature}`,
    session: { shop: input.shop, brandId: input.brandId, expiresAt: new Date(exp * 1000), nonce },
  };
}

/** The session a page token carries, or null when it is malformed, forged or expired. */
export async function readPageToken(
  key: PageSessionKey,
  token: string,
  now: Date,
): Promise<PageSession | null> {
  const match = /^([A-Za-z0-9_-]{1,1024})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!match) return null;
  const [, payload, signature] = match as unknown as [string, string, string];
  if (!(await _verify(key, `page|${payload}`, signature))) return null;
  let claims: { s?: unknown; b?: unknown; e?: unknown; n?: unknown };
  try {
    claims = JSON.parse(new TextDecoder().decode(_fromBase64Url(payload)));
  } catch {
    return null;
  }
  const { s, b, e, n } = claims;
  if (typeof s !== "string" || typeof b !== "string" || typeof e !== "number") return null;
  if (typeof n !== "string" || now.getTime() >= e * 1000) return null;
  return { shop: s, brandId: b, expiresAt: new Date(e * 1000), nonce: n };
}

/** The CSRF token of the session's forms. */
export async function csrfToken(key: PageSessionKey, session: PageSession): Promise<string> {
  return await _sign(key, `csrf|${session.nonce}|${session.brandId}`);
}

/** Whether a submitted CSRF token is the session's (compared in constant time). */
export async function checkCsrfToken(
  key: PageSessionKey,
  session: PageSession,
  submitted: string,
): Promise<boolean> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(submitted)) return false;
  return await _verify(key, `csrf|${session.nonce}|${session.brandId}`, submitted);
}

async function _sign(key: PageSessionKey, input: string): Promise<string> {
  return _toBase64Url(
    new Uint8Array(await crypto.subtle.sign("HMAC", key, _encoder.encode(input))),
  );
}

// crypto.subtle.verify compares in constant time.
async function _verify(key: PageSessionKey, input: string, signature: string): Promise<boolean> {
  return await crypto.subtle.verify("HMAC", key, _fromBase64Url(signature), _encoder.encode(input));
}

function _toBase64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}

function _fromBase64Url(text: string): Uint8Array<ArrayBuffer> {
  const base64 = text.replaceAll("-", "+").replaceAll("_", "/");
  return Uint8Array.from(
    atob(base64 + "=".repeat((4 - base64.length % 4) % 4)),
    (c) => c.charCodeAt(0),
  );
}
