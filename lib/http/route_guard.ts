/**
 * The pipeline's first gate: unknown routes (404), wrong methods (405 with `Allow`), and path or
 * query text PostgreSQL cannot take (NUL, unpaired surrogates).
 *
 * @module
 */
import type { Hono, MiddlewareHandler } from "hono";
import { TrieRouter } from "hono/router/trie-router";
import { HttpError } from "./errors.ts";

const _METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/**
 * Whether PostgreSQL can take `value` as text: no NUL character and no unpaired surrogate
 * (neither can be stored or compared; a query given one fails).
 */
export function storableText(value: string): boolean {
  return !value.includes("\0") && value.isWellFormed();
}

/** The first decoded path segment or query name or value that is not storable text. */
function _unstorable(url: URL): string | null {
  for (const segment of url.pathname.split("/")) {
    let decoded = segment;
    try {
      decoded = decodeURIComponent(segment);
    } catch { /* not UTF-8: the router keeps it encoded too, which is plain ASCII */ }
    if (!storableText(decoded)) return "the path";
  }
  for (const [name, value] of url.searchParams) {
    if (!storableText(name)) return "a query parameter name";
    if (!storableText(value)) return `query parameter ${JSON.stringify(name)}`;
  }
  return null;
}

/**
 * Answers unknown paths with 404 `not_found`, and a known path asked with a method it does not
 * serve with 405 `method_not_allowed` and an `Allow` header, before authentication: route
 * existence is public in /openapi.json. OPTIONS is answered by the CORS middleware ahead of it.
 * Then a path or query parameter holding a NUL or an unpaired surrogate (`%00`) is 400
 * `bad_request`: no route can store or look up such a value. The route table is read from the
 * app on first use, when every route is registered.
 */
// deno-lint-ignore no-explicit-any
export function routeGuard(app: Hono<any, any, any>): MiddlewareHandler {
  let router: TrieRouter<string> | undefined;
  const allowed = (path: string): string[] => {
    if (!router) {
      router = new TrieRouter<string>();
      for (const route of app.routes) {
        if (route.method !== "ALL" && !route.path.includes("*")) {
          router.add(route.method, route.path, route.method);
        }
      }
    }
    const methods = _METHODS.filter((method) => router!.match(method, path)[0].length > 0);
    if (methods.length === 0) return [];
    return [...methods, ...(methods.includes("GET") ? ["HEAD"] : []), "OPTIONS"];
  };
  return async function routeGuardMiddleware(c, next) {
    const methods = allowed(c.req.path);
    if (methods.length === 0) {
      throw new HttpError(404, "not_found", `No route for ${c.req.method} ${c.req.path}`);
    }
    if (!methods.includes(c.req.method)) {
      throw new HttpError(
        405,
        "method_not_allowed",
        `${c.req.method} is not allowed on ${c.req.path}`,
        { headers: { Allow: methods.join(", ") } },
      );
    }
    // A parsed URL is ASCII: only a percent-escape can decode to such a character.
    const unstorable = c.req.url.includes("%") ? _unstorable(new URL(c.req.url)) : null;
    if (unstorable) {
      throw new HttpError(
        400,
        "bad_request",
        `${unstorable} must not contain a NUL character or an unpaired surrogate`,
      );
    }
    await next();
  };
}
