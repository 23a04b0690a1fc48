/**
 * Authentication of the pipeline: API keys for the data routes, Shopify session tokens for key
 * management, and the scope and commerce gates a handler checks. Declares the `auth` and
 * `kvPrefetch` context variables.
 *
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import {
  API_KEY_PREFIX,
  type ApiKeyRecord,
  liveApiKey,
  wellFormedKeyHash,
} from "../tenancy/api_keys.ts";
import {
  type BrandCache,
  type BrandContext,
  isShopErased,
  SHOP_ERASED_MESSAGE,
} from "../tenancy/brands.ts";
import type { Config } from "../config.ts";
import type { Sql } from "../store/db.ts";
import { HttpError } from "./errors.ts";
import { apiKeyByHashKey, brandVersionKey, kvKeyId } from "../store/kv_keys.ts";
import { brandOfSessionToken, looksLikeJwt } from "../tenancy/session_token.ts";

/** The authenticated caller of a request. */
export interface AuthContext extends BrandContext {
  keyId: string;
}

/** The context variables authentication sets. */
export interface AuthVariables {
  auth: AuthContext;
  /** KV entries read ahead with the key record (by `kvKeyId`), so a limiter need not read. */
  kvPrefetch: Map<string, Deno.KvEntryMaybe<unknown>>;
}

/** A Hono environment holding at least the authentication variables. */
export type AuthEnv = { Variables: AuthVariables };

const _CHALLENGE = { "WWW-Authenticate": 'Bearer realm="cdp"' };

/** Key ids and brands remembered by {@linkcode apiKeyAuth}; past this many it starts over. */
const _KNOWN_KEYS = 10_000;

/**
 * Bearer API-key authentication: resolves key → brand → scope into `c.var.auth`, or 401. The
 * key record is read on every request (a revocation applies to the next one); the brand comes
 * from `brands`, checked against the brand's version, read with the keys `prefetch` names (the
 * limiters' windows of the key and of its brand), which land in `c.var.kvPrefetch`. A key's id
 * and brand never change, so once a key has been seen they are known ahead and all of it is one
 * `getMany`. A brand whose shop was erased by shop/redact is 403 `forbidden` until an operator
 * reconnects it.
 */
export function apiKeyAuth<E extends AuthEnv = AuthEnv>(
  deps: { kv: Deno.Kv; sql: Sql; now: () => Date },
  options: {
    brands: BrandCache;
    prefetch?: (key: { id: string; brand: string }) => Deno.KvKey[];
    /**
     * Where the key is read (default: the Bearer header; 401 when absent). The Segment door
     * also reads a Basic username or the body's `writeKey` (routes/segment.ts).
     */
    token?: (c: Context) => string;
  },
): MiddlewareHandler<E> {
  const known = new Map<string, { id: string; brand: string }>();
  const alsoRead = (key: { id: string; brand: string }) => [
    brandVersionKey(key.brand),
    ...(options.prefetch?.(key) ?? []),
  ];
  const read = options.token ?? bearerToken;
  return async function apiKeyAuthMiddleware(c, next) {
    const token = read(c);
    if (looksLikeJwt(token)) {
      throw new HttpError(401, "unauthorized", "Data routes take an API key, not a session token", {
        headers: _CHALLENGE,
      });
    }
    const hash = wellFormedKeyHash(token);
    let record: ApiKeyRecord | null = null;
    let more: Deno.KvEntryMaybe<unknown>[] = [];
    if (hash) {
      const recordKey = apiKeyByHashKey(hash);
      const hint = known.get(hash);
      if (hint) {
        const [entry, ...rest] = await deps.kv.getMany([recordKey, ...alsoRead(hint)]);
        record = await liveApiKey(deps, entry as Deno.KvEntryMaybe<ApiKeyRecord>);
        more = rest;
        if (!record) known.delete(hash);
        else if (record.id !== hint.id || record.brand !== hint.brand) {
          known.delete(hash);
          more = await deps.kv.getMany(alsoRead(record));
        }
      } else {
        record = await liveApiKey(deps, await deps.kv.get<ApiKeyRecord>(recordKey));
        if (record) {
          if (known.size >= _KNOWN_KEYS) known.clear();
          known.set(hash, { id: record.id, brand: record.brand });
          more = await deps.kv.getMany(alsoRead(record));
        }
      }
    }
    const [version, ...rest] = more;
    const brand = record && version
      ? await options.brands.get(deps.sql, record.brand, version.versionstamp)
      : null;
    if (!record || !brand) {
      // One answer for every failure, so a caller learns nothing about which keys exist.
      throw new HttpError(401, "unauthorized", "API key is invalid, revoked or expired", {
        headers: { "WWW-Authenticate": 'Bearer realm="cdp", error="invalid_token"' },
      });
    }
    // After shop/redact the brand may not write, and there is nothing left to read: every data
    // route is closed to it until an operator reconnects the shop.
    if (isShopErased(brand)) throw new HttpError(403, "forbidden", SHOP_ERASED_MESSAGE);
    c.set("kvPrefetch", new Map(rest.map((entry) => [kvKeyId(entry.key), entry])));
    c.set("auth", { ...brand, keyId: record.id });
    await next();
  };
}

/**
 * Shopify session-token authentication for the key-management routes: resolves the token's shop
 * to its brand into `c.var.auth`. API keys are refused here (401).
 */
export function sessionTokenAuth<E extends AuthEnv = AuthEnv>(
  deps: { sql: Sql; now: () => Date; config: Pick<Config, "shopify"> },
): MiddlewareHandler<E> {
  return async function sessionTokenAuthMiddleware(c, next) {
    const token = bearerToken(c);
    if (token.startsWith(API_KEY_PREFIX)) {
      throw new HttpError(
        401,
        "unauthorized",
        "Key management takes a Shopify session token, not an API key",
        { headers: _CHALLENGE },
      );
    }
    const { brand, claims } = await brandOfSessionToken(deps, token);
    c.set("auth", { ...brand, keyId: `session:${claims.shop}:${claims.sub ?? "app"}` });
    await next();
  };
}

/** The request's Bearer credential; 401 `unauthorized` when it has none. */
export function bearerToken(c: Context): string {
  const match = c.req.header("authorization")?.match(/^Bearer\s+(\S+)\s*$/i);
  if (!match) {
    throw new HttpError(401, "unauthorized", "Missing bearer credential", { headers: _CHALLENGE });
  }
  return match[1]!;
}

/** The caller's shop scope; 403 `forbidden` when no integration resolves one. */
export function requireScope<E extends AuthEnv>(c: Context<E>): string {
  const auth: AuthContext = c.get("auth");
  if (!auth.scope) {
    throw new HttpError(403, "forbidden", "No connected storefront integration resolves a scope");
  }
  return auth.scope;
}

/**
 * The gate of commerce, customer and insight routes: the scope, then the
 * `beta:cdp-commerce` permission (403 `beta_not_enabled`), then a connected, enabled storefront
 * integration (403 `integration_not_connected`).
 */
export function requireCommerce<E extends AuthEnv>(c: Context<E>): string {
  const auth: AuthContext = c.get("auth");
  if (!auth.beta) {
    throw new HttpError(403, "beta_not_enabled", "The brand is not enrolled in the commerce beta");
  }
  if (!auth.scope || auth.integration?.status !== "connected" || !auth.integration.isEnabled) {
    throw new HttpError(
      403,
      "integration_not_connected",
      "No connected storefront integration",
    );
  }
  return auth.scope;
}
