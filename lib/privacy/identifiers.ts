/**
 * Privacy identifiers: how a request's identifier is classified (as `GET /cdp/customers/{id}`
 * classifies it), and the keyed hash that is all the audit and the engine's blocks keep of a
 * profile id, an email or a phone.
 *
 * @module
 */
import { createHmac } from "node:crypto";
import { normalizeEmail, normalizePhone } from "../commerce/contacts.ts";
import { privacyHashSecretKey } from "../store/kv_keys.ts";

/** What an identifier names, by its shape. */
export type IdentifierKind = "email" | "phone" | "shopify_customer_id" | "profile_id";

/** An identifier classified and normalized. */
export interface Identifier {
  kind: IdentifierKind;
  value: string;
}

/**
 * Classifies as the customer record does: `@` = email (normalized), leading `+` = phone (E.164),
 * all digits = storefront customer id, anything else = a profile id (or a contact's UUID). An
 * email or phone that does not normalize is kept as sent, lower-cased: it then matches nothing.
 */
export function classifyIdentifier(raw: string): Identifier {
  const identifier = raw.trim();
  if (identifier.includes("@")) {
    return { kind: "email", value: normalizeEmail(identifier) ?? identifier.toLowerCase() };
  }
  if (identifier.startsWith("+")) {
    return { kind: "phone", value: normalizePhone(identifier) ?? identifier };
  }
  if (/^\d+$/.test(identifier)) return { kind: "shopify_customer_id", value: identifier };
  return { kind: "profile_id", value: identifier };
}

/** Keyed hashes of identifiers (HMAC-SHA-256, base64url), one key per deployment. */
export interface IdentifierHasher {
  hash(identifier: Identifier): string;
}

/**
 * The hasher: its key derived from `TOKEN_ENCRYPTION_KEY` when set, else generated once and kept
 * in Deno KV (like the token cipher's), so every process hashes alike and a database dump alone
 * cannot test guesses against the hashes.
 */
export async function openIdentifierHasher(
  kv: Deno.Kv,
  configuredKey: string | undefined,
): Promise<IdentifierHasher> {
  const key = configuredKey
    ? createHmac("sha256", configuredKey).update("privacy identifier hash").digest()
    : await _kvSecret(kv);
  return {
    hash: ({ kind, value }) =>
      createHmac("sha256", key).update(`${kind}\u0000${value}`).digest("base64url"),
  };
}

/**
 * {@linkcode openIdentifierHasher} opened on first use: for the engine's admission hook, built
 * before the stores are read.
 */
export function lazyIdentifierHasher(
  kv: Deno.Kv,
  configuredKey: string | undefined,
): () => Promise<IdentifierHasher> {
  let opening: Promise<IdentifierHasher> | null = null;
  return () => {
    opening ??= openIdentifierHasher(kv, configuredKey).catch((err) => {
      opening = null;
      throw err;
    });
    return opening;
  };
}

async function _kvSecret(kv: Deno.Kv): Promise<Uint8Array> {
  const key = privacyHashSecretKey();
  // Two processes may race to create it: the atomic check lets exactly one win.
  const fresh = crypto.getRandomValues(new Uint8Array(32));
  await kv.atomic().check({ key, versionstamp: null }).set(key, fresh).commit();
  const stored = await kv.get<Uint8Array>(key);
  if (!(stored.value instanceof Uint8Array)) throw new Error("privacy hash key missing in KV");
  return stored.value;
}

const _EMAIL_KEYS = new Set(["email"]);
const _PHONE_KEYS = new Set(["phone", "phonenumber"]);
// Deep enough for updateProperties' `update`/`add` maps and Segment's traits.
const _MAX_DEPTH = 3;

/**
 * The identifiers an event carries: its profile id, and every email or phone in its properties
 * (a key `email`, `phone` or `phoneNumber`, or a dotted one ending so, such as updateProperties'
 * `properties.email`), at most three objects deep.
 */
export function eventIdentifiers(
  profileId: string,
  properties: Record<string, unknown>,
): Identifier[] {
  const found: Identifier[] = [{ kind: "profile_id", value: profileId }];
  const visit = (value: unknown, depth: number) => {
    if (depth > _MAX_DEPTH || value === null || typeof value !== "object") return;
    if (Array.isArray(value)) return;
    for (const [key, inner] of Object.entries(value)) {
      const name = key.slice(key.lastIndexOf(".") + 1).toLowerCase();
      if (typeof inner === "string") {
        const normalized = _EMAIL_KEYS.has(name)
          ? normalizeEmail(inner)
          : _PHONE_KEYS.has(name)
          ? normalizePhone(inner)
          : null;
        if (normalized) {
          found.push({ kind: _EMAIL_KEYS.has(name) ? "email" : "phone", value: normalized });
        }
      } else visit(inner, depth + 1);
    }
  };
  visit(properties, 0);
  return found;
}
