/**
 * Destinations' signing secrets at rest (docs/audiences.md#signing-secrets-at-rest): a row holds
 * the secret sealed with the service's cipher (`v1.<iv>.<sealed>`, lib/tenancy/token_cipher.ts),
 * opened only where a delivery or a test is signed. Rows written before secrets were sealed hold
 * the plaintext (`whsec_...`, never mistaken for a sealed one): they keep signing, and are sealed
 * the first time they are read for signing, or by the delivery timer's sweep at its start.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import type { TokenCipher } from "../tenancy/token_cipher.ts";
import { SIGNING_SECRET_PREFIX } from "./webhook_signature.ts";

/** A stored secret opened, or why it cannot be (the delivery's last error says it). */
export type OpenedSecret = { ok: true; secret: string } | { ok: false; error: string };

/** The secrets a delivery is signed with, or why the current one cannot be opened. */
export type OpenedSecrets = { ok: true; secrets: string[] } | { ok: false; error: string };

/** A destination row's secrets as stored: the current one and a rotated one with its expiry. */
export interface StoredSecrets {
  id: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
}

/** What an operator reads when a secret was sealed under a key this process does not have. */
export const UNREADABLE_SECRET_ERROR =
  "the destination's signing secret cannot be decrypted with this service's key " +
  "(TOKEN_ENCRYPTION_KEY, or the key kept in Deno KV, changed since it was defined): " +
  "restore that key, or delete the destination and define it again";

/**
 * The signing secret of a destination row as stored. A plaintext one (written before secrets
 * were sealed) is sealed in its row on the way; one sealed under another key is `ok: false`.
 */
export async function openSigningSecret(
  deps: { sql: Sql; cipher: TokenCipher },
  destination: { id: string; secret: string },
): Promise<OpenedSecret> {
  if (destination.secret.startsWith(SIGNING_SECRET_PREFIX)) {
    await _seal(deps, destination.id, destination.secret);
    return { ok: true, secret: destination.secret };
  }
  try {
    return { ok: true, secret: await deps.cipher.decrypt(destination.secret) };
  } catch {
    return { ok: false, error: UNREADABLE_SECRET_ERROR };
  }
}

/**
 * The secrets a delivery signed at `now` carries: the current one, then the one a rotation
 * replaced until it expires. A previous secret that cannot be opened is left out (the current
 * one still signs); a current one that cannot be is `ok: false`.
 */
export async function openSigningSecrets(
  deps: { sql: Sql; cipher: TokenCipher },
  destination: StoredSecrets,
  now: Date,
): Promise<OpenedSecrets> {
  const current = await openSigningSecret(deps, destination);
  if (!current.ok) return current;
  const expires = destination.previous_secret_expires_at;
  if (destination.previous_secret === null || expires === null || expires <= now) {
    return { ok: true, secrets: [current.secret] };
  }
  try {
    return {
      ok: true,
      secrets: [current.secret, await deps.cipher.decrypt(destination.previous_secret)],
    };
  } catch {
    return { ok: true, secrets: [current.secret] };
  }
}

/** Seals every destination's plaintext secret; answers how many rows it sealed (idempotent). */
export async function sealPlaintextSecrets(
  deps: { sql: Sql; cipher: Pick<TokenCipher, "encrypt"> },
): Promise<number> {
  const rows = await deps.sql<{ id: string; secret: string }[]>`
    select id, secret from destinations where starts_with(secret, ${SIGNING_SECRET_PREFIX})`;
  let sealed = 0;
  for (const row of rows) sealed += await _seal(deps, row.id, row.secret);
  return sealed;
}

async function _seal(
  deps: { sql: Sql; cipher: Pick<TokenCipher, "encrypt"> },
  id: string,
  plaintext: string,
): Promise<number> {
  const sealed = await deps.cipher.encrypt(plaintext);
  // Only over the plaintext read: a process sealing the same row at once leaves its one value.
  const updated = await deps.sql`
    update destinations set secret = ${sealed} where id = ${id} and secret = ${plaintext}`;
  return updated.count;
}
