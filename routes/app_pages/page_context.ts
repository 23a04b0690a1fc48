/**
 * What every dashboard page is rendered with: the page session, the brand, and how to build
 * links and forms that carry the session.
 *
 * @module
 */
import type { BrandContext } from "../../lib/tenancy/brands.ts";
import type { PageSession } from "../../lib/dashboard/page_session.ts";
import type { ChartRenderer } from "../../lib/dashboard/charts.ts";

/** The signed-in page: its session, the brand, the CSRF token of its forms, and its links. */
export interface PageContext {
  session: PageSession;
  /** The page token, carried in links and forms. */
  token: string;
  brand: BrandContext;
  csrf: string;
  /** The app's chart renderer. */
  charts: ChartRenderer;
  /** A link to a dashboard path that keeps the session. */
  link(path: string, params?: Record<string, string | number>): string;
}

/** The query parameter (and form field) carrying the page token. */
export const SESSION_PARAM = "s";

/** Builds the link helper of a page session. */
export function pageLinks(token: string): PageContext["link"] {
  return (path, params = {}) => {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params)) query.set(name, String(value));
    query.set(SESSION_PARAM, token);
    return `${path}?${query}`;
  };
}
