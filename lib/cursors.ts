import { HttpError } from "./errors.ts";
import { cursorKey } from "./kv_keys.ts";

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
