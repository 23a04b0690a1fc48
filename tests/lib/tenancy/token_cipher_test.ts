import assert from "node:assert/strict";
import { tokenEncryptionSecretKey } from "../../../lib/store/kv_keys.ts";
import { openKv } from "../../../lib/store/kv_store.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { withKv } from "../../test_support.ts";

const TOKEN = "shpat_0123456789abcdef0123456789abcdef";

function randomKey(): string {
  return btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
}

/** Flips one byte inside the base64 part `part` (1 = iv, 2 = sealed) of a ciphertext. */
function tamper(ciphertext: string, part: 1 | 2): string {
  const parts = ciphertext.split(".");
  const bytes = Uint8Array.from(atob(parts[part]!), (c) => c.charCodeAt(0));
  bytes[0] = bytes[0]! ^ 0x01;
  parts[part] = btoa(String.fromCharCode(...bytes));
  return parts.join(".");
}

Deno.test("token cipher: round trip; fresh IV each time; no plaintext in the ciphertext", async () => {
  await withKv(async (kv) => {
    const cipher = await openTokenCipher(kv, undefined);
    for (const plaintext of [TOKEN, "", "ünïcødé ✓ 🔑", "x".repeat(5000)]) {
      const a = await cipher.encrypt(plaintext);
      const b = await cipher.encrypt(plaintext);
      assert.match(a, /^v1\.[A-Za-z0-9+/]+=*\.[A-Za-z0-9+/]+=*$/);
      assert.notEqual(a, b);
      assert.notEqual(a.split(".")[1], b.split(".")[1], "IVs differ");
      assert.equal(await cipher.decrypt(a), plaintext);
      assert.equal(await cipher.decrypt(b), plaintext);
    }
    const sealed = await cipher.encrypt(TOKEN);
    assert.ok(!sealed.includes(TOKEN));
    assert.ok(!sealed.includes("0123456789abcdef"));
    assert.ok(!sealed.includes(btoa(TOKEN).slice(0, 16)));
  });
});

Deno.test("token cipher: the generated KV key is created once and reused", async () => {
  await withKv(async (kv) => {
    const first = await openTokenCipher(kv, undefined);
    const stored = await kv.get<Uint8Array>(tokenEncryptionSecretKey());
    assert.ok(stored.value instanceof Uint8Array);
    assert.equal(stored.value.byteLength, 32);

    const second = await openTokenCipher(kv, undefined);
    assert.equal(await second.decrypt(await first.encrypt(TOKEN)), TOKEN);
    assert.equal(await first.decrypt(await second.encrypt(TOKEN)), TOKEN);
    const after = await kv.get(tokenEncryptionSecretKey());
    assert.equal(after.versionstamp, stored.versionstamp, "the secret was not rewritten");
    assert.equal((await Array.fromAsync(kv.list({ prefix: [] }))).length, 1);
  });
});

Deno.test("token cipher: the KV key is shared by two handles on one file and survives a restart", async () => {
  const path = await Deno.makeTempFile({ suffix: ".sqlite3" });
  try {
    let sealed: string;
    // Opened as the service opens KV: two handles on one SQLite file can find it locked.
    const a = await openKv(path);
    const b = await openKv(path);
    try {
      const ca = await openTokenCipher(a, undefined);
      const cb = await openTokenCipher(b, undefined);
      sealed = await ca.encrypt(TOKEN);
      assert.equal(await cb.decrypt(sealed), TOKEN);
      assert.equal(await ca.decrypt(await cb.encrypt(TOKEN)), TOKEN);
    } finally {
      a.close();
      b.close();
    }
    const reopened = await openKv(path);
    try {
      assert.equal(await (await openTokenCipher(reopened, undefined)).decrypt(sealed), TOKEN);
    } finally {
      reopened.close();
    }
  } finally {
    for (const file of [path, `${path}-wal`, `${path}-shm`]) {
      await Deno.remove(file).catch(() => {});
    }
  }
});

Deno.test("token cipher: a configured key works, leaves KV alone, and no other key decrypts", async () => {
  await withKv(async (kv) => {
    const key = randomKey();
    const cipher = await openTokenCipher(kv, key);
    const sealed = await cipher.encrypt(TOKEN);
    assert.equal(await cipher.decrypt(sealed), TOKEN);
    assert.equal(await (await openTokenCipher(kv, key)).decrypt(sealed), TOKEN);
    assert.equal((await kv.get(tokenEncryptionSecretKey())).value, null);

    const other = await openTokenCipher(kv, randomKey());
    await assert.rejects(other.decrypt(sealed));
    const generated = await openTokenCipher(kv, undefined);
    await assert.rejects(generated.decrypt(sealed));
    await assert.rejects(cipher.decrypt(await generated.encrypt(TOKEN)));
  });
});

Deno.test("token cipher: tampered or malformed ciphertext rejects", async () => {
  await withKv(async (kv) => {
    const cipher = await openTokenCipher(kv, randomKey());
    const sealed = await cipher.encrypt(TOKEN);
    await assert.rejects(cipher.decrypt(tamper(sealed, 2)));
    await assert.rejects(cipher.decrypt(tamper(sealed, 1)));
    const [, iv, body] = sealed.split(".");
    await assert.rejects(cipher.decrypt(`v1.${iv}.${body!.slice(0, -4)}`));
    for (const bad of ["", "garbage", `v2.${iv}.${body}`, `v1.${iv}`, `v1..${body}`, `${TOKEN}`]) {
      await assert.rejects(cipher.decrypt(bad), Error, JSON.stringify(bad));
    }
  });
});
