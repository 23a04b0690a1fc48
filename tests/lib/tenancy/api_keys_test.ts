import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import {
  API_KEY_PREFIX,
  type ApiKeyDeps,
  type ApiKeyRecord,
  authenticateApiKey,
  generateApiKey,
  hashApiKey,
  issueApiKey,
  isWellFormedApiKey,
  listApiKeys,
  revokeApiKey,
  rotateApiKey,
} from "../../../lib/tenancy/api_keys.ts";
import { DomainError } from "../../../lib/errors.ts";
import { apiKeyByBrandKey, apiKeyByHashKey, apiKeyByIdKey } from "../../../lib/store/kv_keys.ts";
import { type TestClock, testClock } from "../../test_support.ts";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

async function withKeys(
  fn: (deps: ApiKeyDeps, clock: TestClock) => Promise<void>,
): Promise<void> {
  const kv = await Deno.openKv(":memory:");
  const clock = testClock();
  try {
    await fn({ kv, now: clock.now, newId: monotonicFactory() }, clock);
  } finally {
    kv.close();
  }
}

async function storedRecord(deps: ApiKeyDeps, key: string): Promise<ApiKeyRecord | null> {
  return (await deps.kv.get<ApiKeyRecord>(apiKeyByHashKey(await hashApiKey(key)))).value;
}

/** Replaces the character at `index` with another base62 character. */
function tamper(key: string, index: number): string {
  const current = key[index]!;
  const replacement = ALPHABET[(ALPHABET.indexOf(current) + 1) % ALPHABET.length]!;
  return key.slice(0, index) + replacement + key.slice(index + 1);
}

Deno.test("generateApiKey: svc_ followed by 36 base62 characters, well-formed", () => {
  const key = generateApiKey();
  assert.equal(API_KEY_PREFIX, "svc_");
  assert.match(key, /^svc_[0-9A-Za-z]{36}$/);
  assert.equal(key.length, 40);
  assert.equal(isWellFormedApiKey(key), true);
});

Deno.test("generateApiKey: 2,000 keys are distinct and use the whole base62 alphabet", () => {
  const keys = Array.from({ length: 2000 }, () => generateApiKey());
  assert.equal(new Set(keys).size, keys.length);
  const seen = new Set<string>();
  for (const key of keys) {
    assert.ok(isWellFormedApiKey(key), key);
    for (const ch of key.slice(4, 34)) seen.add(ch);
  }
  // 60,000 random characters: missing any of the 62 would point at a biased generator.
  assert.equal(seen.size, 62);
});

Deno.test("isWellFormedApiKey: any single changed character (body or checksum) is rejected", () => {
  const key = generateApiKey();
  for (let i = API_KEY_PREFIX.length; i < key.length; i++) {
    const tampered = tamper(key, i);
    assert.notEqual(tampered, key);
    assert.equal(isWellFormedApiKey(tampered), false, `position ${i}: ${tampered}`);
  }
  // Swapping two different adjacent body characters is caught too.
  const body = key.slice(4, 34);
  const i = [...body].findIndex((ch, n) => n > 0 && ch !== body[n - 1]);
  if (i > 0) {
    const swapped = key.slice(0, 4 + i - 1) + body[i] + body[i - 1] + key.slice(4 + i + 1);
    assert.equal(isWellFormedApiKey(swapped), false);
  }
});

Deno.test("isWellFormedApiKey: other prefixes, lengths and characters are rejected", () => {
  const key = generateApiKey();
  const rest = key.slice(4);
  const cases = [
    "",
    "svc_",
    `sk_${rest}`,
    `SVC_${rest}`,
    `svc-${rest}`,
    `xsvc_${rest}`,
    `svc_${rest}0`,
    key.slice(0, -1),
    ` ${key}`,
    `${key} `,
    `${key}\n`,
    `svc_${rest.slice(0, 10)}-${rest.slice(11)}`,
    `svc_${rest.slice(0, 10)}_${rest.slice(11)}`,
    "svc_000000000000000000000000000000000000",
  ];
  for (const candidate of cases) {
    assert.equal(isWellFormedApiKey(candidate), false, JSON.stringify(candidate));
  }
});

Deno.test("hashApiKey: lower-case SHA-256 hex", async () => {
  assert.equal(
    await hashApiKey("abc"),
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
  const key = generateApiKey();
  const hash = await hashApiKey(key);
  assert.match(hash, /^[0-9a-f]{64}$/);
  assert.equal(await hashApiKey(key), hash);
  assert.notEqual(await hashApiKey(generateApiKey()), hash);
});

Deno.test("issueApiKey: KV holds the hash and three index entries, never the plaintext", async () => {
  await withKeys(async (deps, clock) => {
    const issued = await issueApiKey(deps, { brandId: "brand_a", name: "ci" });
    assert.ok(isWellFormedApiKey(issued.key));
    assert.match(issued.id, /^key_/);
    assert.equal(issued.prefix, issued.key.slice(0, 10));
    assert.deepEqual(issued.record, {
      id: issued.id,
      brand: "brand_a",
      prefix: issued.prefix,
      name: "ci",
      created_at: clock.now().toISOString(),
      last_used_at: null,
      revoked_at: null,
      expires_at: null,
    });

    const hash = await hashApiKey(issued.key);
    assert.deepEqual((await deps.kv.get(apiKeyByHashKey(hash))).value, issued.record);
    assert.equal((await deps.kv.get(apiKeyByIdKey(issued.id))).value, hash);
    assert.equal((await deps.kv.get(apiKeyByBrandKey("brand_a", issued.id))).value, hash);

    const entries = await Array.fromAsync(deps.kv.list({ prefix: [] }));
    assert.equal(entries.length, 3);
    const secret = issued.key.slice(API_KEY_PREFIX.length);
    for (const entry of entries) {
      const dump = JSON.stringify([entry.key, entry.value]);
      assert.ok(!dump.includes(issued.key), `plaintext in ${dump}`);
      assert.ok(!dump.includes(secret), `secret part in ${dump}`);
    }
  });
});

Deno.test("issueApiKey: name defaults to null and expiresAt is stored as ISO", async () => {
  await withKeys(async (deps, clock) => {
    const expiresAt = new Date(clock.now().getTime() + 3_600_000);
    const issued = await issueApiKey(deps, { brandId: "brand_a", expiresAt });
    assert.equal(issued.record.name, null);
    assert.equal(issued.record.expires_at, expiresAt.toISOString());
    const other = await issueApiKey(deps, { brandId: "brand_a" });
    assert.notEqual(other.id, issued.id);
    assert.notEqual(other.key, issued.key);
  });
});

Deno.test("authenticateApiKey: valid → record; unknown or malformed → null", async () => {
  await withKeys(async (deps) => {
    const issued = await issueApiKey(deps, { brandId: "brand_a" });
    const record = await authenticateApiKey(deps, issued.key);
    assert.ok(record);
    assert.equal(record.id, issued.id);
    assert.equal(record.brand, "brand_a");
    assert.equal(await authenticateApiKey(deps, generateApiKey()), null);
    assert.equal(await authenticateApiKey(deps, tamper(issued.key, 10)), null);
    assert.equal(await authenticateApiKey(deps, ""), null);
    assert.equal(await authenticateApiKey(deps, issued.prefix), null);
  });
});

Deno.test("authenticateApiKey: a revoked key → null", async () => {
  await withKeys(async (deps) => {
    const issued = await issueApiKey(deps, { brandId: "brand_a" });
    const sibling = await issueApiKey(deps, { brandId: "brand_a" });
    assert.ok(await authenticateApiKey(deps, issued.key));
    await revokeApiKey(deps, { brandId: "brand_a", keyId: issued.id });
    assert.equal(await authenticateApiKey(deps, issued.key), null);
    // Revoking one key leaves the brand's other keys working.
    assert.equal((await authenticateApiKey(deps, sibling.key))?.id, sibling.id);
  });
});

Deno.test("authenticateApiKey: a key is refused from its expiresAt on", async () => {
  await withKeys(async (deps, clock) => {
    const expiresAt = new Date(clock.now().getTime() + 3_600_000);
    const issued = await issueApiKey(deps, { brandId: "brand_a", expiresAt });
    assert.ok(await authenticateApiKey(deps, issued.key));
    clock.advance(3_600_000 - 1);
    assert.ok(await authenticateApiKey(deps, issued.key));
    clock.advance(1);
    assert.equal(await authenticateApiKey(deps, issued.key), null);
    clock.advance(86_400_000);
    assert.equal(await authenticateApiKey(deps, issued.key), null);
  });
});

Deno.test("authenticateApiKey: last_used_at set on first use, kept within 60 s, then rewritten", async () => {
  await withKeys(async (deps, clock) => {
    const issued = await issueApiKey(deps, { brandId: "brand_a" });
    assert.equal((await storedRecord(deps, issued.key))?.last_used_at, null);

    clock.advance(5_000);
    const first = clock.now().toISOString();
    assert.equal((await authenticateApiKey(deps, issued.key))?.last_used_at, first);
    assert.equal((await storedRecord(deps, issued.key))?.last_used_at, first);
    const { versionstamp } = await deps.kv.get(apiKeyByHashKey(await hashApiKey(issued.key)));

    clock.advance(59_999);
    assert.equal((await authenticateApiKey(deps, issued.key))?.last_used_at, first);
    const again = await deps.kv.get(apiKeyByHashKey(await hashApiKey(issued.key)));
    assert.equal(again.versionstamp, versionstamp, "no KV write within the resolution");
    assert.equal((again.value as ApiKeyRecord).last_used_at, first);

    clock.advance(1);
    const later = clock.now().toISOString();
    assert.equal((await authenticateApiKey(deps, issued.key))?.last_used_at, later);
    assert.equal((await storedRecord(deps, issued.key))?.last_used_at, later);
  });
});

Deno.test("authenticateApiKey: a racing last_used_at write never resurrects a revoked key", async () => {
  await withKeys(async (deps) => {
    for (let i = 0; i < 20; i++) {
      const issued = await issueApiKey(deps, { brandId: "brand_a" });
      // First use writes last_used_at while the revocation lands concurrently.
      await Promise.all([
        authenticateApiKey(deps, issued.key),
        revokeApiKey(deps, { brandId: "brand_a", keyId: issued.id }),
      ]);
      assert.ok((await storedRecord(deps, issued.key))?.revoked_at, `iteration ${i}`);
      assert.equal(await authenticateApiKey(deps, issued.key), null);
    }
  });
});

Deno.test("revokeApiKey: idempotent; keeps the first revocation time", async () => {
  await withKeys(async (deps, clock) => {
    const issued = await issueApiKey(deps, { brandId: "brand_a" });
    clock.advance(1_000);
    const revokedAt = clock.now().toISOString();
    const first = await revokeApiKey(deps, { brandId: "brand_a", keyId: issued.id });
    assert.equal(first?.id, issued.id);
    assert.equal(first?.revoked_at, revokedAt);
    clock.advance(1_000);
    const second = await revokeApiKey(deps, { brandId: "brand_a", keyId: issued.id });
    assert.deepEqual(second, first);
    assert.equal((await storedRecord(deps, issued.key))?.revoked_at, revokedAt);
  });
});

Deno.test("revokeApiKey: another brand's key or an unknown id → null, and the key keeps working", async () => {
  await withKeys(async (deps) => {
    const issued = await issueApiKey(deps, { brandId: "brand_a" });
    assert.equal(await revokeApiKey(deps, { brandId: "brand_b", keyId: issued.id }), null);
    assert.equal(await revokeApiKey(deps, { brandId: "brand_a", keyId: "key_unknown" }), null);
    assert.equal((await storedRecord(deps, issued.key))?.revoked_at, null);
    assert.equal((await authenticateApiKey(deps, issued.key))?.id, issued.id);
  });
});

Deno.test("rotateApiKey: a key in its grace period is not rotated again (409), concurrently either", async () => {
  await withKeys(async (deps, clock) => {
    const issued = await issueApiKey(deps, { brandId: "brand_a", name: "ci" });
    const rotate = () =>
      rotateApiKey(deps, { brandId: "brand_a", keyId: issued.id, graceMs: 60_000 });
    const first = await rotate();
    assert.ok(first !== null && first !== "not_live");
    assert.equal((await storedRecord(deps, issued.key))?.replaced_by, first.id);
    clock.advance(1_000);
    await assert.rejects(rotate(), (err: unknown) => {
      assert.ok(err instanceof DomainError);
      assert.equal(err.kind, "conflict");
      assert.match(err.message, new RegExp(first.id));
      return true;
    });
    // The replacement is untouched: same key, no expiry; and no third key was minted.
    assert.equal((await authenticateApiKey(deps, first.key))?.expires_at, null);
    assert.equal((await listApiKeys(deps.kv, "brand_a")).length, 2);
    // Two rotations at once: one replacement.
    const other = await issueApiKey(deps, { brandId: "brand_a" });
    const racing = await Promise.allSettled(
      [1, 2, 3].map(() =>
        rotateApiKey(deps, { brandId: "brand_a", keyId: other.id, graceMs: 60_000 })
      ),
    );
    assert.equal(racing.filter((r) => r.status === "fulfilled").length, 1);
    assert.equal((await listApiKeys(deps.kv, "brand_a")).length, 4);
    // After the grace the old key is not live: 409 as before, by its own answer.
    clock.advance(60_000);
    assert.equal(await rotate(), "not_live");
  });
});
