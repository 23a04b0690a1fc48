/**
 * A brand's webhook destinations: define, read, update, delete, rotate the signing secret, and
 * their recent deliveries (docs/audiences.md#destinations). A signing secret is returned once, at
 * creation or rotation; reads never carry it, and its row holds it sealed (destination_secret.ts).
 * A destination starts at the end of the change log: it hears the changes made after it was
 * defined.
 *
 * @module
 */
import { DomainError } from "../errors.ts";
import type { Sql, Tx } from "../store/db.ts";
import type { TokenCipher } from "../tenancy/token_cipher.ts";
import { FEED_ROW_SPAN } from "./changes.ts";
import { parseDestinationUrl } from "./destination_url.ts";
import { newSigningSecret, SIGNING_SECRET_PREFIX } from "./webhook_signature.ts";

/** A destination as the API shows it (no secret). */
export interface DestinationView {
  id: string;
  name: string;
  type: "webhook";
  url: string;
  segments: string[];
  /** The consent type a profile must have granted for its changes to be delivered, or null. */
  requiredConsent: string | null;
  createdAt: string;
  updatedAt: string;
}

/** What defining or updating a destination takes. */
export interface DestinationInput {
  name: string;
  url: string;
  segments: string[];
  requiredConsent?: string | null;
}

/** What destination writes need. */
export interface DestinationDeps {
  sql: Sql;
  now: () => Date;
  newId: () => string;
  settings: { allowPrivate: boolean; maxPerBrand: number };
  /** Seals the signing secret for its row. */
  cipher: Pick<TokenCipher, "encrypt">;
}

interface _Row {
  id: string;
  name: string;
  url: string;
  segments: string[];
  required_consent: string | null;
  created_at: Date;
  updated_at: Date;
}

function _view(row: _Row): DestinationView {
  return {
    id: row.id,
    name: row.name,
    type: "webhook",
    url: row.url,
    segments: row.segments,
    requiredConsent: row.required_consent,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

// Per brand, destination definitions take turns on this lock (with the brand id's hash), so
// concurrent ones cannot pass the cap.
const _DEFINE_LOCK = 0xde57;

/**
 * Defines a destination of the brand; answers it with its signing secret (shown once). A segment
 * not of the brand's scope is `not_found`; past `maxPerBrand`, `invalid_input` naming the limit.
 */
export async function createDestination(
  deps: DestinationDeps,
  brand: { brandId: string; scope: string },
  input: DestinationInput,
): Promise<DestinationView & { secret: string }> {
  parseDestinationUrl(input.url, deps.settings.allowPrivate);
  const secret = newSigningSecret();
  const sealed = await deps.cipher.encrypt(secret);
  const now = deps.now();
  const id = `dst_${deps.newId()}`;
  const row = await deps.sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${_DEFINE_LOCK}, hashtext(${brand.brandId}))`;
    await _assertSegments(tx, brand.scope, input.segments);
    const [held] = await tx<{ count: number }[]>`
      select count(*)::int as count from destinations where brand_id = ${brand.brandId}`;
    if (held!.count >= deps.settings.maxPerBrand) {
      throw new DomainError(
        "invalid_input",
        `a brand has at most ${deps.settings.maxPerBrand} destinations ` +
          "(MAX_DESTINATIONS_PER_BRAND); delete one or update one instead",
      );
    }
    // Starts at the feed's end (the last position of its last row): the changes from now on.
    const [created] = await tx<_Row[]>`
      insert into destinations
        (id, brand_id, scope, name, type, url, secret, segments, required_consent, cursor,
         created_at, updated_at)
      values (${id}, ${brand.brandId}, ${brand.scope}, ${input.name}, 'webhook', ${input.url},
        ${sealed}, ${input.segments}::text[], ${input.requiredConsent ?? null},
        (select coalesce(segment_feed_position(max(seq), ${FEED_ROW_SPAN}), 0) from segment_feed),
        ${now}, ${now})
      returning id, name, url, segments, required_consent, created_at, updated_at`;
    return created!;
  });
  return { ..._view(row), secret };
}

/** A page of the brand's destinations, oldest first, with their number. */
export async function listDestinations(
  sql: Sql,
  scope: string,
  page: { limit: number; offset: number },
): Promise<{ list: DestinationView[]; total: number }> {
  const rows = await sql<_Row[]>`
    select id, name, url, segments, required_consent, created_at, updated_at
    from destinations where scope = ${scope} order by id
    limit ${page.limit} offset ${page.offset}`;
  const [counted] = await sql<{ n: number }[]>`
    select count(*)::int as n from destinations where scope = ${scope}`;
  return { list: rows.map(_view), total: counted!.n };
}

/** One of the brand's destinations, or null (missing and another brand's alike). */
export async function getDestination(
  sql: Sql,
  scope: string,
  id: string,
): Promise<DestinationView | null> {
  const [row] = await sql<_Row[]>`
    select id, name, url, segments, required_consent, created_at, updated_at
    from destinations where scope = ${scope} and id = ${id}`;
  return row ? _view(row) : null;
}

/**
 * Replaces a destination's name, URL, segments and required consent; the secret and the position in the log stay
 * (a segment added hears its changes from that position on). Null when not the brand's.
 */
export async function updateDestination(
  deps: Pick<DestinationDeps, "sql" | "now" | "settings">,
  scope: string,
  id: string,
  input: DestinationInput,
): Promise<DestinationView | null> {
  parseDestinationUrl(input.url, deps.settings.allowPrivate);
  return await deps.sql.begin(async (tx) => {
    await _assertSegments(tx, scope, input.segments);
    const [row] = await tx<_Row[]>`
      update destinations set name = ${input.name}, url = ${input.url},
        segments = ${input.segments}::text[], required_consent = ${input.requiredConsent ?? null},
        updated_at = ${deps.now()}
      where scope = ${scope} and id = ${id}
      returning id, name, url, segments, required_consent, created_at, updated_at`;
    return row ? _view(row) : null;
  });
}

/** How long a rotated secret keeps signing beside the new one, at most. */
export const MAX_ROTATION_OVERLAP_SECONDS = 7 * 86_400;

/**
 * Gives a destination a new signing secret, answered once; the one it replaces keeps signing
 * beside it (a second `v1` of every signature) for `overlapSeconds` (0: stops at once), so a
 * receiver can switch without refusing a delivery. A secret rotated out before is dropped. Null
 * when the destination is not the scope's.
 */
export async function rotateSigningSecret(
  deps: Pick<DestinationDeps, "sql" | "now" | "cipher">,
  scope: string,
  id: string,
  overlapSeconds: number,
): Promise<{ id: string; secret: string; previousSecretExpiresAt: string | null } | null> {
  const secret = newSigningSecret();
  const sealed = await deps.cipher.encrypt(secret);
  const now = deps.now();
  const expires = overlapSeconds > 0 ? new Date(now.getTime() + overlapSeconds * 1000) : null;
  return await deps.sql.begin(async (tx) => {
    const [row] = await tx<{ secret: string }[]>`
      select secret from destinations where scope = ${scope} and id = ${id} for update`;
    if (!row) return null;
    // The replaced secret is kept sealed, whatever its row held (a plaintext one predates sealing).
    const previous = expires === null
      ? null
      : row.secret.startsWith(SIGNING_SECRET_PREFIX)
      ? await deps.cipher.encrypt(row.secret)
      : row.secret;
    await tx`
      update destinations set secret = ${sealed}, previous_secret = ${previous},
        previous_secret_expires_at = ${expires}, updated_at = ${now}
      where id = ${id}`;
    return { id, secret, previousSecretExpiresAt: expires?.toISOString() ?? null };
  });
}

/** Deletes a destination and its deliveries; false when not the brand's. */
export async function deleteDestination(sql: Sql, scope: string, id: string): Promise<boolean> {
  const rows = await sql`delete from destinations where scope = ${scope} and id = ${id}`;
  return rows.count > 0;
}

async function _assertSegments(sql: Sql | Tx, scope: string, segments: string[]): Promise<void> {
  const found = await sql<{ id: string }[]>`
    select id from segments where scope = ${scope} and id = any(${segments}::text[])`;
  const known = new Set(found.map((row) => row.id));
  const missing = segments.find((segment) => !known.has(segment));
  if (missing !== undefined) throw new DomainError("not_found", `Segment not found: ${missing}`);
}
