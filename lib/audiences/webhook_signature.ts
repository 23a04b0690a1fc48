/**
 * Signing webhook deliveries (Stripe's scheme): `X-CDP-Signature: t=<unix seconds>,v1=<hex>`,
 * the HMAC-SHA256 keyed with the destination's secret exactly as returned, over
 * `"<t>.<raw body>"`; while a rotated secret still signs, a second `v1` is its signature.
 * Receivers verify it with the snippet of docs/audiences.md#verifying-a-delivery (the delivery
 * tests run that very snippet).
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

/** The `X-CDP-Signature` value of `body` signed at `at`, a `v1` per secret in their order. */
export async function signatureHeader(
  secrets: string | readonly string[],
  body: string,
  at: Date,
): Promise<string> {
  const t = Math.floor(at.getTime() / 1000);
  const signatures = await Promise.all(
    (typeof secrets === "string" ? [secrets] : secrets).map((secret) =>
      _hmacHex(secret, `${t}.${body}`)
    ),
  );
  return [`t=${t}`, ...signatures.map((hex) => `v1=${hex}`)].join(",");
}
