import type { Context, MiddlewareHandler } from "hono";
import { authenticateApiKey } from "./api_keys.ts";
import type { AppDeps, AppEnv, AuthContext } from "./app_env.ts";
import { findBrandContext } from "./brands.ts";
import { HttpError } from "./errors.ts";

const _CHALLENGE = { "WWW-Authenticate": 'Bearer realm="cdp"' };

/** Bearer API-key authentication: resolves key → brand → scope into `c.var.auth`, or 401. */
export function apiKeyAuth(
  deps: Pick<AppDeps, "kv" | "sql" | "now">,
): MiddlewareHandler<AppEnv> {
  return async function apiKeyAuthMiddleware(c, next) {
    const header = c.req.header("authorization");
    const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
    if (!match) {
      throw new HttpError(401, "unauthorized", "Missing bearer credential", {
        headers: _CHALLENGE,
      });
    }
    const record = await authenticateApiKey(deps, match[1]!);
    const brand = record ? await findBrandContext(deps.sql, record.brand) : null;
    if (!record || !brand) {
      // One answer for every failure, so a caller learns nothing about which keys exist.
      throw new HttpError(401, "unauthorized", "API key is invalid, revoked or expired", {
        headers: { ..._CHALLENGE, "WWW-Authenticate": 'Bearer realm="cdp", error="invalid_token"' },
      });
    }
    c.set("auth", { ...brand, keyId: record.id });
    await next();
  };
}

/** The caller's shop scope; 403 `forbidden` when no integration resolves one. */
export function requireScope(c: Context<AppEnv>): string {
  const auth: AuthContext = c.get("auth");
  if (!auth.scope) {
    throw new HttpError(403, "forbidden", "No connected storefront integration resolves a scope");
  }
  return auth.scope;
}
