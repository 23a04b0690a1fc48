/**
 * Verification of Shopify session tokens (HS256 JWTs from App Bridge) for key management.
 *
 * @module
 */
import type { Config } from "../config.ts";
import type { Sql } from "../store/db.ts";
import {
  type BrandContext,
  findBrandContext,
  findBrandIdByShop,
  parseShopDomain,
} from "./brands.ts";
import { DomainError } from "../errors.ts";

/** What a verified Shopify session token says. */
export interface SessionClaims {
  /** The shop domain of `dest` (and `iss`). */
  shop: string;
  /** The staff user (Shopify user id), when present. */
  sub: string | null;
  /** The token's id, when present. */
  jti: string | null;
}

/** The app's credentials and the clock a token is checked against. */
export interface SessionTokenOptions {
  apiKey: string;
  apiSecret: string;
  now: Date;
  /** Clock skew tolerated on `exp` and `nbf` (seconds). */
  leewaySeconds?: number;
}

const _LEEWAY_SECONDS = 5;

/**
 * Verifies a Shopify session token: an HS256 JWT signed with the app's
 * secret, `aud` = the app's API key, `dest` = `https://<shop>` and `iss` on the same shop,
 * `exp`/`nbf` within a few seconds of leeway. Any other algorithm (`none` included) is refused.
 * Every failure is 401 `unauthorized` with the reason.
 */
export async function verifySessionToken(
  token: string,
  options: SessionTokenOptions,
): Promise<SessionClaims> {
  const parts = token.split(".");
  if (parts.length !== 3) _fail("not a JWT");
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  const header = _decodeJson(headerPart, "header");
  if (header.alg !== "HS256") _fail(`algorithm ${JSON.stringify(header.alg)} is not accepted`);
  if (header.typ !== undefined && header.typ !== "JWT") _fail("not a JWT");
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(options.apiSecret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["verify"],
  );
  // crypto.subtle.verify compares in constant time.
  const valid = await crypto.subtle.verify(
    "HMAC",
    key,
    _fromBase64Url(signaturePart, "signature"),
    new TextEncoder().encode(`${headerPart}.${payloadPart}`),
  );
  if (!valid) _fail("bad signature");

  const claims = _decodeJson(payloadPart, "payload");
  const now = options.now.getTime() / 1000;
  const leeway = options.leewaySeconds ?? _LEEWAY_SECONDS;
  if (typeof claims.exp !== "number") _fail("no exp");
  if (now > claims.exp + leeway) _fail("expired");
  if (claims.nbf !== undefined && (typeof claims.nbf !== "number" || now < claims.nbf - leeway)) {
    _fail("not yet valid");
  }
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(options.apiKey)) _fail("issued for another app");
  const dest = _shopOf(claims.dest, "");
  const iss = _shopOf(claims.iss, "/admin");
  if (!dest || !iss || dest !== iss) _fail("dest and iss must name the same shop");
  return {
    shop: dest,
    sub: typeof claims.sub === "string" ? claims.sub : null,
    jti: typeof claims.jti === "string" ? claims.jti : null,
  };
}

/**
 * The brand whose shop a session token names, with the token's claims: 503 when the app's
 * credentials are not configured, 401 for an invalid token or a shop no brand is connected to.
 * Key management and the dashboard both authenticate through this.
 */
export async function brandOfSessionToken(
  deps: { sql: Sql; now: () => Date; config: Pick<Config, "shopify"> },
  token: string,
): Promise<{ brand: BrandContext; claims: SessionClaims }> {
  const { apiKey, apiSecret } = deps.config.shopify;
  if (!apiKey || !apiSecret) {
    throw new DomainError(
      "service_unavailable",
      "Session tokens are not configured (SHOPIFY_API_KEY, SHOPIFY_API_SECRET)",
    );
  }
  const claims = await verifySessionToken(token, { apiKey, apiSecret, now: deps.now() });
  const brandId = await findBrandIdByShop(deps.sql, claims.shop);
  const brand = brandId ? await findBrandContext(deps.sql, brandId) : null;
  if (!brand) {
    throw new DomainError("unauthenticated", "No brand is connected to this shop", {
      challenge: 'Bearer realm="cdp"',
    });
  }
  return { brand, claims };
}

/** Signs claims as an HS256 JWT (what Shopify does; used by tests and local tooling). */
export async function signSessionToken(
  claims: Record<string, unknown>,
  secret: string,
  header: Record<string, unknown> = { alg: "HS256", typ: "JWT" },
): Promise<string> {
  const encode = (value: unknown) => _toBase64Url(new TextEncoder().encode(JSON.stringify(value)));
  const signingInput = `${encode(header)}.${encode(claims)}`;
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const signature = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(signingInput));
  return `${signingInput}.${_toBase64Url(new Uint8Array(signature))}`;
}

/** True when a bearer credential has the shape of a JWT (three base64url parts). */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

// The claim must be exactly `https://<shop><path>`, matched as text: a URL parser would drop a
// default port (`:443`) and set user info (`evil@`) aside.
function _shopOf(value: unknown, path: string): string | null {
  const prefix = "https://";
  if (typeof value !== "string" || !value.startsWith(prefix) || !value.endsWith(path)) {
    return null;
  }
  const host = value.slice(prefix.length, value.length - path.length);
  return parseShopDomain(host) === host ? host : null;
}

function _decodeJson(part: string, what: string): Record<string, unknown> {
  try {
    const value = JSON.parse(new TextDecoder().decode(_fromBase64Url(part, what)));
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value;
  } catch { /* reported below */ }
  return _fail(`malformed ${what}`);
}

function _fromBase64Url(part: string, what: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9_-]*$/.test(part)) _fail(`malformed ${what}`);
  const base64 = part.replaceAll("-", "+").replaceAll("_", "/");
  try {
    return Uint8Array.from(
      atob(base64 + "=".repeat((4 - base64.length % 4) % 4)),
      (c) => c.charCodeAt(0),
    );
  } catch {
    return _fail(`malformed ${what}`);
  }
}

function _toBase64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}

function _fail(reason: string): never {
  throw new DomainError("unauthenticated", `invalid session token: ${reason}`, {
    challenge: 'Bearer realm="cdp-keys", error="invalid_token"',
  });
}
