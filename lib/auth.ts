import type { Context, MiddlewareHandler } from "hono";
import { API_KEY_PREFIX, authenticateApiKey } from "./api_keys.ts";
import type { AppDeps, AppEnv, AuthContext } from "./app_env.ts";
import { type BrandCache, findBrandContext, findBrandIdByShop } from "./brands.ts";
import { HttpError } from "./errors.ts";
import { brandVersionKey, kvKeyId } from "./kv_keys.ts";
import { looksLikeJwt, verifySessionToken } from "./session_token.ts";

const _CHALLENGE = { "WWW-Authenticate": 'Bearer realm="cdp"' };

/**
 * Bearer API-key authentication: resolves key → brand → scope into `c.var.auth`, or 401. The
 * key record is read on every request (a revocation applies to the next one); the brand comes
 * from `brands`, checked against the brand's version read in one `getMany` with the keys
 * `prefetch` names (a limiter's window), which land in `c.var.kvPrefetch`.
 */
export function apiKeyAuth(
  deps: Pick<AppDeps, "kv" | "sql" | "now">,
  options: { brands: BrandCache; prefetch?: (keyId: string) => Deno.KvKey[] },
): MiddlewareHandler<AppEnv> {
  return async function apiKeyAuthMiddleware(c, next) {
    const token = _bearer(c);
    if (looksLikeJwt(token)) {
      throw new HttpError(401, "unauthorized", "Data routes take an API key, not a session token", {
        headers: _CHALLENGE,
      });
    }
    const record = await authenticateApiKey(deps, token);
    let brand = null;
    if (record) {
      const keys = [brandVersionKey(record.brand), ...(options.prefetch?.(record.id) ?? [])];
      const [version, ...rest] = await deps.kv.getMany(keys);
      c.set("kvPrefetch", new Map(rest.map((entry) => [kvKeyId(entry.key), entry])));
      brand = await options.brands.get(deps.sql, record.brand, version!.versionstamp);
    }
    if (!record || !brand) {
      // One answer for every failure, so a caller learns nothing about which keys exist.
      throw new HttpError(401, "unauthorized", "API key is invalid, revoked or expired", {
        headers: { "WWW-Authenticate": 'Bearer realm="cdp", error="invalid_token"' },
      });
    }
    c.set("auth", { ...brand, keyId: record.id });
    await next();
  };
}

/**
 * Shopify session-token authentication for the key-management routes: resolves the token's shop
 * to its brand into `c.var.auth`. API keys are refused here (401).
 */
export function sessionTokenAuth(
  deps: Pick<AppDeps, "sql" | "now" | "config">,
): MiddlewareHandler<AppEnv> {
  return async function sessionTokenAuthMiddleware(c, next) {
    const token = _bearer(c);
    if (token.startsWith(API_KEY_PREFIX)) {
      throw new HttpError(
        401,
        "unauthorized",
        "Key management takes a Shopify session token, not an API key",
        { headers: _CHALLENGE },
      );
    }
    const { apiKey, apiSecret } = deps.config.shopify;
    if (!apiKey || !apiSecret) {
      throw new HttpError(
        503,
        "service_unavailable",
        "Session tokens are not configured (SHOPIFY_API_KEY, SHOPIFY_API_SECRET)",
      );
    }
    const claims = await verifySessionToken(token, { apiKey, apiSecret, now: deps.now() });
    const brandId = await findBrandIdByShop(deps.sql, claims.shop);
    const brand = brandId ? await findBrandContext(deps.sql, brandId) : null;
    if (!brand) {
      throw new HttpError(401, "unauthorized", "No brand is connected to this shop", {
        headers: _CHALLENGE,
      });
    }
    c.set("auth", { ...brand, keyId: `session:${claims.shop}:${claims.sub ?? "app"}` });
    await next();
  };
}

function _bearer(c: Context<AppEnv>): string {
  const match = c.req.header("authorization")?.match(/^Bearer\s+(\S+)\s*$/i);
  if (!match) {
    throw new HttpError(401, "unauthorized", "Missing bearer credential", { headers: _CHALLENGE });
  }
  return match[1]!;
}

/** The caller's shop scope; 403 `forbidden` when no integration resolves one. */
export function requireScope(c: Context<AppEnv>): string {
  const auth: AuthContext = c.get("auth");
  if (!auth.scope) {
    throw new HttpError(403, "forbidden", "No connected storefront integration resolves a scope");
  }
  return auth.scope;
}

/**
 * The gate of commerce, customer and insight routes (spec 5.4): the scope, then the
 * `beta:cdp-commerce` permission (403 `beta_not_enabled`), then a connected, enabled storefront
 * integration (403 `integration_not_connected`).
 */
export function requireCommerce(c: Context<AppEnv>): string {
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
