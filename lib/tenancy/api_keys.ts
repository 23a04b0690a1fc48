/**
 * API keys: issuing, hashing, listing, revoking and expiring them in Deno KV.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { DomainError } from "../errors.ts";
import {
  apiKeyByBrandKey,
  apiKeyByHashKey,
  apiKeyByIdKey,
  apiKeysOfBrandPrefix,
} from "../store/kv_keys.ts";

/** The literal prefix of every API key. */
export const API_KEY_PREFIX = "svc_";

const _ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
// 30 base62 characters carry 178 bits of randomness; 6 more hold a CRC32 of them.
const _RANDOM_CHARS = 30;
const _CHECKSUM_CHARS = 6;
const _KEY_PATTERN = new RegExp(
  `^${API_KEY_PREFIX}[0-9A-Za-z]{${_RANDOM_CHARS + _CHECKSUM_CHARS}}$`,
);
// last_used_at is a hint, not an audit log: writing it on every request would double KV writes.
const _LAST_USED_RESOLUTION_MS = 60_000;

/** What KV stores for a key (never the plaintext; the KV key is the plaintext's SHA-256). */
export interface ApiKeyRecord {
  id: string;
  brand: string;
  prefix: string;
  name: string | null;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  expires_at: string | null;
  /** Set by a rotation: the id of the key that replaced this one (absent until rotated). */
  replaced_by?: string;
}

/** What a key's owner may see of its record: everything but the brand (theirs) and the hash. */
export type ApiKeyView = Omit<ApiKeyRecord, "brand">;

/** The owner's view of a key record (the `/cdp/keys` answers and `key list`). */
export function apiKeyView(record: ApiKeyRecord): ApiKeyView {
  return {
    id: record.id,
    name: record.name,
    prefix: record.prefix,
    created_at: record.created_at,
    last_used_at: record.last_used_at,
    expires_at: record.expires_at,
    revoked_at: record.revoked_at,
  };
}

/** Clock and id source for key operations. */
export interface ApiKeyDeps {
  kv: Deno.Kv;
  now: () => Date;
  newId: () => string;
}

/** Generates a plaintext key: `svc_` + 30 random base62 characters + a 6-character CRC32. */
export function generateApiKey(): string {
  let body = "";
  while (body.length < _RANDOM_CHARS) {
    for (const byte of crypto.getRandomValues(new Uint8Array(_RANDOM_CHARS))) {
      // 248 = 4 * 62: rejecting larger bytes keeps every character equally likely.
      if (byte < 248 && body.length < _RANDOM_CHARS) body += _ALPHABET[byte % 62];
    }
  }
  return `${API_KEY_PREFIX}${body}${_checksum(body)}`;
}

/** True when the key has the `svc_` shape and its checksum matches (catches typos offline). */
export function isWellFormedApiKey(key: string): boolean {
  if (!_KEY_PATTERN.test(key)) return false;
  const body = key.slice(API_KEY_PREFIX.length, API_KEY_PREFIX.length + _RANDOM_CHARS);
  return key.endsWith(_checksum(body));
}

/** SHA-256 hex of a plaintext key: the only form in which a key is stored. */
export function hashApiKey(key: string): Promise<string> {
  return Promise.resolve(_sha256(key));
}

/** {@linkcode hashApiKey} of a well-formed key, or null when the key is malformed. */
export function wellFormedKeyHash(key: string): string | null {
  return isWellFormedApiKey(key) ? _sha256(key) : null;
}

function _sha256(key: string): string {
  // node:crypto hashes synchronously: WebCrypto's async digest is costly per request.
  return createHash("sha256").update(key).digest("hex");
}

/** Issues a key for a brand; the returned `key` is the only time the plaintext exists. */
export async function issueApiKey(
  deps: ApiKeyDeps,
  input: { brandId: string; name?: string | null; expiresAt?: Date | null },
): Promise<{ id: string; key: string; prefix: string; record: ApiKeyRecord }> {
  const { key, hash, record } = await _newKey(deps, {
    brandId: input.brandId,
    name: input.name ?? null,
    expiresAt: input.expiresAt?.toISOString() ?? null,
  });
  const result = await deps.kv.atomic()
    .check({ key: apiKeyByHashKey(hash), versionstamp: null })
    .set(apiKeyByHashKey(hash), record)
    .set(apiKeyByIdKey(record.id), hash)
    .set(apiKeyByBrandKey(input.brandId, record.id), hash)
    .commit();
  if (!result.ok) throw new Error("API key collision; issue again");
  return { id: record.id, key, prefix: record.prefix, record };
}

/**
 * Resolves a presented key to its live record, or null when it is malformed, unknown, revoked or
 * expired. Reads KV on every call, so a revocation applies to the very next request.
 */
export async function authenticateApiKey(
  deps: Pick<ApiKeyDeps, "kv" | "now">,
  key: string,
): Promise<ApiKeyRecord | null> {
  const hash = wellFormedKeyHash(key);
  return hash
    ? await liveApiKey(deps, await deps.kv.get<ApiKeyRecord>(apiKeyByHashKey(hash)))
    : null;
}

/**
 * The live record of a key's KV entry (null when unknown, revoked or expired); records its use
 * in `last_used_at` at most once a minute.
 */
export async function liveApiKey(
  deps: Pick<ApiKeyDeps, "kv" | "now">,
  entry: Deno.KvEntryMaybe<ApiKeyRecord>,
): Promise<ApiKeyRecord | null> {
  const record = entry.value;
  const now = deps.now();
  if (!record || record.revoked_at !== null) return null;
  if (record.expires_at !== null && Date.parse(record.expires_at) <= now.getTime()) return null;
  const lastUsed = record.last_used_at ? Date.parse(record.last_used_at) : 0;
  if (now.getTime() - lastUsed >= _LAST_USED_RESOLUTION_MS) {
    const touched = { ...record, last_used_at: now.toISOString() };
    // Losing this race to a revocation must not resurrect the key: check the versionstamp.
    await deps.kv.atomic().check(entry).set(entry.key, touched).commit();
    return touched;
  }
  return record;
}

/** Revokes a brand's key by id; null when the brand has no such key. Idempotent. */
export async function revokeApiKey(
  deps: Pick<ApiKeyDeps, "kv" | "now">,
  input: { brandId: string; keyId: string },
): Promise<ApiKeyRecord | null> {
  const hashEntry = await deps.kv.get<string>(apiKeyByBrandKey(input.brandId, input.keyId));
  if (!hashEntry.value) return null;
  while (true) {
    const entry = await deps.kv.get<ApiKeyRecord>(apiKeyByHashKey(hashEntry.value));
    if (!entry.value) return null;
    if (entry.value.revoked_at !== null) return entry.value;
    const revoked = { ...entry.value, revoked_at: deps.now().toISOString() };
    const result = await deps.kv.atomic().check(entry).set(entry.key, revoked).commit();
    if (result.ok) return revoked;
  }
}

async function _newKey(
  deps: Pick<ApiKeyDeps, "now" | "newId">,
  input: { brandId: string; name: string | null; expiresAt: string | null },
): Promise<{ key: string; hash: string; record: ApiKeyRecord }> {
  const key = generateApiKey();
  return {
    key,
    hash: await hashApiKey(key),
    record: {
      id: `key_${deps.newId()}`,
      brand: input.brandId,
      prefix: key.slice(0, API_KEY_PREFIX.length + 6),
      name: input.name,
      created_at: deps.now().toISOString(),
      last_used_at: null,
      revoked_at: null,
      expires_at: input.expiresAt,
    },
  };
}

function _checksum(body: string): string {
  let crc = _crc32(new TextEncoder().encode(body));
  let out = "";
  for (let i = 0; i < _CHECKSUM_CHARS; i++) {
    out = _ALPHABET[crc % 62] + out;
    crc = Math.floor(crc / 62);
  }
  return out;
}

let _crcTable: Uint32Array | undefined;

function _crc32(bytes: Uint8Array): number {
  _crcTable ??= Uint32Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  let crc = 0xffffffff;
  for (const byte of bytes) crc = _crcTable[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** A brand's keys, oldest first (records only: never a plaintext or a hash). */
export async function listApiKeys(kv: Deno.Kv, brandId: string): Promise<ApiKeyRecord[]> {
  const hashes = await Array.fromAsync(kv.list<string>({ prefix: apiKeysOfBrandPrefix(brandId) }));
  const records: ApiKeyRecord[] = [];
  // getMany reads at most 10 keys at a time.
  for (let i = 0; i < hashes.length; i += 10) {
    const entries = await kv.getMany<ApiKeyRecord[]>(
      hashes.slice(i, i + 10).map((entry) => apiKeyByHashKey(entry.value)),
    );
    for (const entry of entries) if (entry.value) records.push(entry.value);
  }
  return records.sort((a, b) =>
    a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id)
  );
}

/** True while a key authenticates: not revoked, not past its expiry. */
export function isLive(record: ApiKeyRecord, now: Date): boolean {
  return record.revoked_at === null &&
    (record.expires_at === null || Date.parse(record.expires_at) > now.getTime());
}

/**
 * Replaces a live key with a new one (same name, same expiry) and lets the old one work for
 * `graceMs` more (or until its own earlier expiry), in one atomic commit. Null when the brand
 * has no such key; "not_live" when it is revoked or expired. A key rotated already (in its
 * grace period) is a `conflict` DomainError naming its replacement: a second rotation would
 * mint a key that expires with the grace, and the first replacement's plaintext is not kept to
 * be answered again, so repeating a rotation is refused rather than repeated.
 */
export async function rotateApiKey(
  deps: ApiKeyDeps,
  input: { brandId: string; keyId: string; graceMs: number },
): Promise<
  | { id: string; key: string; prefix: string; record: ApiKeyRecord; previous: ApiKeyRecord }
  | null
  | "not_live"
> {
  const hashEntry = await deps.kv.get<string>(apiKeyByBrandKey(input.brandId, input.keyId));
  if (!hashEntry.value) return null;
  while (true) {
    const entry = await deps.kv.get<ApiKeyRecord>(apiKeyByHashKey(hashEntry.value));
    if (!entry.value) return null;
    const now = deps.now();
    if (!isLive(entry.value, now)) return "not_live";
    if (entry.value.replaced_by !== undefined) {
      throw new DomainError(
        "conflict",
        `Key ${entry.value.id} was rotated already: its replacement is ` +
          `${entry.value.replaced_by} and it stops at ${entry.value.expires_at}; rotate the ` +
          "replacement instead",
      );
    }
    const graceEnd = now.getTime() + input.graceMs;
    const currentEnd = entry.value.expires_at ? Date.parse(entry.value.expires_at) : Infinity;
    const { key, hash, record } = await _newKey(deps, {
      brandId: input.brandId,
      name: entry.value.name,
      expiresAt: entry.value.expires_at,
    });
    const previous: ApiKeyRecord = {
      ...entry.value,
      expires_at: new Date(Math.min(graceEnd, currentEnd)).toISOString(),
      replaced_by: record.id,
    };
    const result = await deps.kv.atomic()
      .check(entry)
      .check({ key: apiKeyByHashKey(hash), versionstamp: null })
      .set(entry.key, previous)
      .set(apiKeyByHashKey(hash), record)
      .set(apiKeyByIdKey(record.id), hash)
      .set(apiKeyByBrandKey(input.brandId, record.id), hash)
      .commit();
    if (result.ok) return { id: record.id, key, prefix: record.prefix, record, previous };
  }
}

/**
 * Removes a key's record and indexes. Null when the brand has no such key; "live" (nothing
 * removed) while it still authenticates: revoke it, or let it expire, first.
 */
export async function deleteApiKey(
  deps: Pick<ApiKeyDeps, "kv" | "now">,
  input: { brandId: string; keyId: string },
): Promise<ApiKeyRecord | null | "live"> {
  const hashEntry = await deps.kv.get<string>(apiKeyByBrandKey(input.brandId, input.keyId));
  if (!hashEntry.value) return null;
  const entry = await deps.kv.get<ApiKeyRecord>(apiKeyByHashKey(hashEntry.value));
  if (entry.value && isLive(entry.value, deps.now())) return "live";
  const result = await deps.kv.atomic()
    .check(hashEntry)
    .check(entry)
    .delete(entry.key)
    .delete(apiKeyByIdKey(input.keyId))
    .delete(hashEntry.key)
    .commit();
  // A concurrent change (a rotation, a touch of last_used_at) lost the race: look again.
  return result.ok ? entry.value : await deleteApiKey(deps, input);
}
