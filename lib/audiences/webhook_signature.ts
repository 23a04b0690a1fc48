/**
 * Signing webhook deliveries (Stripe's scheme): `X-CDP-Signature: t=<unix seconds>,v1=<hex>`,
 * the HMAC-SHA256 keyed with the destination's secret exactly as returned at creation, over
 * `"<t>.<raw body>"`. Receivers verify it with the snippet of docs/audiences.md#verifying-a-delivery
 * (the delivery tests run that very snippet).
 *
 * @module
 */

const _encoder = new TextEncoder();

/** How every signing secret begins (a sealed one begins `v1.`: the two never meet). */
export const SIGNING_SECRET_PREFIX = "whsec_";

/** A new signing secret: `whsec_` and 32 random bytes in base64url. */
export function newSigningSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `${SIGNING_SECRET_PREFIX}${
    btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_")
      .replace(/=+$/, "")
  }`;
}

async function _hmacHex(secret: string, text: string): Promise<string> {
  const key = await crypto.subtle.importKey(
    "raw",
    _encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, _encoder.encode(text)));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The `X-CDP-Signature` value of `body` signed at `at`. */
export async function signatureHeader(secret: string, body: string, at: Date): Promise<string> {
  const t = Math.floor(at.getTime() / 1000);
  return `t=${t},v1=${await _hmacHex(secret, `${t}.${body}`)}`;
}
