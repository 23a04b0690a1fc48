import type { Hono, MiddlewareHandler } from "hono";
import { TrieRouter } from "hono/router/trie-router";
import { HttpError } from "./errors.ts";

const _METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/**
 * Answers unknown paths with 404 `not_found`, and a known path asked with a method it does not
 * serve with 405 `method_not_allowed` and an `Allow` header, before authentication: route
 * existence is public in /openapi.json. OPTIONS is answered by the CORS middleware ahead of it.
 * The route table is read from the app on first use, when every route is registered.
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
    await next();
  };
}
