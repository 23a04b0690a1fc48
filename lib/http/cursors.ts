/**
 * Opaque pagination cursors kept in Deno KV, bound to the brand, route and resource that issued them.
 *
 * @module
 */
import { HttpError } from "./errors.ts";
import { assertWithinWindow } from "./pagination.ts";
import { cursorKey } from "../store/kv_keys.ts";

/** What a cursor is bound to: only the same brand, route and resource may redeem it. */
export interface CursorBinding {
  brandId: string;
  /** The route pattern, e.g. `/cdp/profiles/:id/events`. */
  route: string;
  /** The resource the listing belongs to (a profile id, a segment id), or "" for none. */
  resource: string;
}

interface _StoredCursor<T> extends CursorBinding {
  position: T;
  expiresAt: number;
}

/** Clock, store and lifetime of cursors. */
export interface CursorDeps {
  kv: Deno.Kv;
  now: () => Date;
  ttlMs: number;
}

const _TOKEN = /^c1_[A-Za-z0-9_-]{22}$/;

/** Stores a listing position in KV and returns an opaque token for it. */
export async function mintCursor<T>(
  deps: CursorDeps,
  binding: CursorBinding,
  position: T,
): Promise<string> {
  const random = crypto.getRandomValues(new Uint8Array(16));
  const token = `c1_${
    btoa(String.fromCharCode(...random)).replaceAll("+", "-").replaceAll("/", "_").slice(0, 22)
  }`;
  const stored: _StoredCursor<T> = {
    ...binding,
    position,
    expiresAt: deps.now().getTime() + deps.ttlMs,
  };
  // KV expiry is lazy, so expiresAt is what is enforced; expireIn only reclaims space.
  await deps.kv.set(cursorKey(token), stored, { expireIn: deps.ttlMs });
  return token;
}

/**
 * Redeems a cursor token for its position. 400 `bad_request` when malformed, unknown, expired,
 * or minted for another route or resource; 403 `forbidden` when minted for another brand.
 */
export async function readCursor<T>(
  deps: Omit<CursorDeps, "ttlMs">,
  token: string,
  binding: CursorBinding,
): Promise<T> {
  if (!_TOKEN.test(token)) throw new HttpError(400, "bad_request", "cursor is malformed");
  const entry = await deps.kv.get<_StoredCursor<T>>(cursorKey(token));
  const stored = entry.value;
  if (!stored || stored.expiresAt <= deps.now().getTime()) {
    throw new HttpError(400, "bad_request", "cursor is unknown or expired; restart the listing");
  }
  if (stored.brandId !== binding.brandId) {
    throw new HttpError(403, "forbidden", "cursor was issued to another brand");
  }
  if (stored.route !== binding.route) {
    throw new HttpError(400, "bad_request", "cursor was issued for another endpoint");
  }
  if (stored.resource !== binding.resource) {
    throw new HttpError(400, "bad_request", "cursor was issued for another resource");
  }
  return stored.position;
}

/** Where a keyset page starts: after this id, `offset` rows into the listing. */
export interface KeysetStart {
  after?: string;
  offset: number;
}

/**
 * Where a keyset-paged list starts: the cursor's position (the offset is then ignored), or the
 * plain offset page, which must stay within the window. Lists sorted otherwise than by id
 * (`keyset` false) page by offset only, so a cursor there is 400.
 */
export async function keysetStart(
  deps: Omit<CursorDeps, "ttlMs">,
  query: { cursor?: string; limit: number; offset: number },
  binding: CursorBinding,
  keyset = true,
): Promise<KeysetStart> {
  if (query.cursor === undefined) {
    assertWithinWindow(query);
    return { offset: query.offset };
  }
  if (!keyset) {
    throw new HttpError(400, "bad_request", "cursors page the default sort only; use offset");
  }
  return await readCursor<Required<KeysetStart>>(deps, query.cursor, binding);
}

/** The cursor of the page after this one, or null at the end (and for non-keyset sorts). */
export async function nextKeysetCursor(
  deps: CursorDeps,
  binding: CursorBinding,
  page: { more: boolean; lastId: string | undefined; offset: number; count: number },
  keyset = true,
): Promise<string | null> {
  if (!keyset || !page.more || page.lastId === undefined) return null;
  return await mintCursor(deps, binding, { after: page.lastId, offset: page.offset + page.count });
}
