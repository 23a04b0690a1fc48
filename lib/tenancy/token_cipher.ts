/**
 * Encryption of secrets at rest: storefront access tokens and destinations' signing secrets.
 *
 * @module
 */
import { tokenEncryptionSecretKey } from "../store/kv_keys.ts";

/** Encrypts secrets at rest (AES-256-GCM, random 96-bit IV per value): `v1.<iv>.<sealed>`. */
export interface TokenCipher {
  encrypt(plaintext: string): Promise<string>;
  decrypt(ciphertext: string): Promise<string>;
}

/**
 * Builds the cipher from `TOKEN_ENCRYPTION_KEY` (base64 of 32 bytes) or, when unset, from a key
 * generated once and kept in Deno KV: a Postgres dump alone then never reveals a token.
 */
export async function openTokenCipher(
  kv: Deno.Kv,
  configuredKey: string | undefined,
): Promise<TokenCipher> {
  const raw = configuredKey ? _fromBase64(configuredKey) : await _kvSecret(kv);
  const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  return {
    async encrypt(plaintext) {
      const iv = crypto.getRandomValues(new Uint8Array(12));
      const sealed = await crypto.subtle.encrypt(
        { name: "AES-GCM", iv },
        key,
        new TextEncoder().encode(plaintext),
      );
      return `v1.${_toBase64(iv)}.${_toBase64(new Uint8Array(sealed))}`;
    },
    async decrypt(ciphertext) {
      const [version, iv, sealed] = ciphertext.split(".");
      if (version !== "v1" || !iv || !sealed) throw new Error("unknown token ciphertext format");
      const opened = await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: _fromBase64(iv) },
        key,
        _fromBase64(sealed),
      );
      return new TextDecoder().decode(opened);
    },
  };
}

/**
 * {@linkcode openTokenCipher} opened on first use: what the runtime builds before the stores are
 * read, and hands to every module that seals or opens a secret.
 */
export function lazyTokenCipher(kv: Deno.Kv, configuredKey: string | undefined): TokenCipher {
  let opening: Promise<TokenCipher> | null = null;
  const open = () => {
    opening ??= openTokenCipher(kv, configuredKey).catch((err) => {
      opening = null;
      throw err;
    });
    return opening;
  };
  return {
    encrypt: async (plaintext) => await (await open()).encrypt(plaintext),
    decrypt: async (ciphertext) => await (await open()).decrypt(ciphertext),
  };
}

async function _kvSecret(kv: Deno.Kv): Promise<Uint8Array<ArrayBuffer>> {
  const key = tokenEncryptionSecretKey();
  const fresh = crypto.getRandomValues(new Uint8Array(32));
  // Two processes may race to create it: the atomic check lets exactly one win.
  await kv.atomic().check({ key, versionstamp: null }).set(key, fresh).commit();
  const stored = await kv.get<Uint8Array>(key);
  if (!(stored.value instanceof Uint8Array)) throw new Error("token encryption key missing in KV");
  return new Uint8Array(stored.value);
}

function _toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

function _fromBase64(text: string): Uint8Array<ArrayBuffer> {
  return Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));
}
