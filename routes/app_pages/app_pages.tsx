/**
 * The dashboard under `/app`: server-rendered pages for the brand whose shop a Shopify session
 * token names (docs/dashboard.md). `GET /app?shop=&id_token=` verifies the token as key
 * management does and starts a page session; every other page takes that session's token, and
 * forms also its CSRF token. Errors are HTML pages with the API's status; every answer may be
 * framed only by the shop's admin.
 *
 * @module
 */
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../lib/http/app_env.ts";
import { requireCommerce, requireScope } from "../../lib/http/auth.ts";
import type { BrandConcurrency } from "../../lib/http/brand_concurrency.ts";
import { HttpError, toHttpError } from "../../lib/http/errors.ts";
import { OFFSET_WINDOW } from "../../lib/http/pagination.ts";
import { getSegment, openFullExport } from "../../lib/engine/segments.ts";
import { type BrandCache, parseShopDomain } from "../../lib/tenancy/brands.ts";
import { brandOfSessionToken } from "../../lib/tenancy/session_token.ts";
import { issueApiKey, revokeApiKey, rotateApiKey } from "../../lib/tenancy/api_keys.ts";
import { brandVersionKey } from "../../lib/store/kv_keys.ts";
import { createChartRenderer } from "../../lib/dashboard/charts.ts";
import {
  checkCsrfToken,
  csrfToken,
  mintPageToken,
  pageSessionKey,
  readPageToken,
} from "../../lib/dashboard/page_session.ts";
import { customerPage } from "./customer_page.tsx";
import { ErrorPage } from "./error_page.tsx";
import { healthPage } from "./health_page.tsx";
import { insightsPage } from "./insights_page.tsx";
import { CSRF_FIELD, type KeyNotice, keysPage } from "./keys_page.tsx";
import { privacyPage } from "./privacy_page.tsx";
import { exportDocument } from "../../lib/privacy/requests.ts";
import { type PageContext, pageLinks, SESSION_PARAM } from "./page_context.ts";
import { segmentPage, segmentsPage } from "./segments_page.tsx";
import { destinationsPage } from "./destinations_page.tsx";

type _PageEnv = { Variables: AppEnv["Variables"] & { page: PageContext; form: FormData } };

const _Offset = z.coerce.number().int().min(0).max(OFFSET_WINDOW).catch(-1);
const _KeyName = z.string().trim().max(100).transform((name) => name || undefined);
const _KeyId = z.string().min(1).max(64);

/**
 * The dashboard pages, over the app's brand cache, heavy-read limiter and the API's rate limits
 * (a page counts as a request of its session and of its brand).
 */
export function appPageRoutes(
  deps: AppDeps,
  options: {
    brands: BrandCache;
    heavyReads: BrandConcurrency;
    rateLimit: MiddlewareHandler<AppEnv>;
  },
) {
  // The charts of a few pages for each of about a hundred brands (an SVG is 5-20 KB).
  const charts = createChartRenderer({ entries: 500 });
  const secret = deps.config.shopify.apiSecret;
  const key = secret ? pageSessionKey(secret) : null;
  const sessionKey = () => {
    if (!key) {
      throw new HttpError(503, "service_unavailable", "The app secret is not configured");
    }
    return key;
  };

  // The frame of every answer: an HTML page for an error, and the headers Shopify requires of
  // an embedded app (frame-ancestors) plus those that keep the page token in the page.
  const frame: MiddlewareHandler<_PageEnv> = async (c, next) => {
    await next();
    const page = c.get("page") as PageContext | undefined;
    if (c.error) {
      const error = toHttpError(c.error);
      const message = error.status >= 500 && error.code !== "service_unavailable"
        ? "Something went wrong; try again in a moment."
        : error.message;
      c.res = undefined;
      c.res = await c.html(
        <ErrorPage status={error.status} message={message} page={page ?? null} />,
        error.status,
      );
      // Retry-After and the RateLimit-* headers of a 429, as the API's envelope carries them.
      for (const [name, value] of Object.entries(error.headers)) c.res.headers.set(name, value);
    }
    const shop = page?.session.shop ?? parseShopDomain(c.req.query("shop") ?? "");
    c.res.headers.set(
      "Content-Security-Policy",
      `frame-ancestors ${shop ? `https://${shop} ` : ""}https://admin.shopify.com; ` +
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; " +
        "form-action 'self'; base-uri 'none'",
    );
    c.res.headers.set("Referrer-Policy", "no-referrer");
    c.res.headers.set("X-Content-Type-Options", "nosniff");
    c.res.headers.set("Cache-Control", "no-store");
  };

  // A page session: the token from the query (GET) or the form (POST), bound to a brand that is
  // still connected to the token's shop; a form must also carry the session's CSRF token.
  const session: MiddlewareHandler<_PageEnv> = async (c, next) => {
    const signing = await sessionKey();
    let token = c.req.query(SESSION_PARAM);
    if (c.req.method === "POST") {
      const form = await c.req.formData().catch(() => new FormData());
      c.set("form", form);
      token = _field(form, SESSION_PARAM);
    }
    const now = deps.now();
    const read = token ? await readPageToken(signing, token, now) : null;
    if (!token || !read) {
      throw new HttpError(401, "unauthorized", "The page session is missing, invalid or expired.");
    }
    const version = await deps.kv.get(brandVersionKey(read.brandId));
    const brand = await options.brands.get(deps.sql, read.brandId, version.versionstamp);
    if (!brand || brand.scope !== read.shop) {
      throw new HttpError(401, "unauthorized", "This shop is no longer connected to the brand.");
    }
    const page: PageContext = {
      session: read,
      token,
      brand,
      csrf: await csrfToken(signing, read),
      charts,
      link: pageLinks(token),
    };
    c.set("page", page);
    c.set("auth", { ...brand, keyId: `page:${read.shop}` });
    if (c.req.method === "POST") {
      const submitted = _field(c.get("form"), CSRF_FIELD) ?? "";
      if (!(await checkCsrfToken(signing, read, submitted))) {
        throw new HttpError(403, "forbidden", "The form's CSRF token is missing or invalid.");
      }
    }
    // Past the session's or the brand's limit: 429, as an error page with Retry-After.
    await options.rateLimit(c as unknown as Context<AppEnv>, next);
  };

  const offsetOf = (value: string | undefined) => {
    const offset = _Offset.parse(value ?? 0);
    if (offset < 0) throw new HttpError(400, "bad_request", `offset must be 0..${OFFSET_WINDOW}`);
    return offset;
  };

  const keyAction = async (
    c: Context<_PageEnv>,
    act: (page: PageContext, form: FormData) => Promise<KeyNotice>,
  ) => {
    const page = c.get("page");
    const notice = await act(page, c.get("form"));
    return c.html(
      await keysPage(deps, page, notice),
      notice.kind === "error" ? notice.status : 200,
    );
  };
  const keyId = (form: FormData) => {
    const parsed = _KeyId.safeParse(_field(form, "id"));
    if (!parsed.success) throw new HttpError(400, "bad_request", "id is required");
    return parsed.data;
  };

  const app = new Hono<_PageEnv>();
  // "/app/*" matches "/app" itself too.
  app.use("/app/*", frame);
  return app
    .get("/app", async (c) => {
      const idToken = c.req.query("id_token");
      if (!idToken) {
        throw new HttpError(
          401,
          "unauthorized",
          "Open this app from the Shopify admin: the request carries no session token.",
        );
      }
      const { brand, claims } = await brandOfSessionToken(deps, idToken);
      const shopParam = c.req.query("shop");
      if (shopParam !== undefined && parseShopDomain(shopParam) !== claims.shop) {
        throw new HttpError(401, "unauthorized", "The session token is for another shop.");
      }
      const minted = await mintPageToken(await sessionKey(), {
        shop: claims.shop,
        brandId: brand.brandId,
        now: deps.now(),
      });
      return c.redirect(pageLinks(minted.token)("/app/insights"), 303);
    })
    .get("/app/insights", session, async (c) => {
      const scope = requireCommerce(c);
      const offset = offsetOf(c.req.query("offset"));
      return c.html(await insightsPage(deps, c.get("page"), { scope, offset }));
    })
    .get("/app/customers", session, async (c) => {
      const scope = requireCommerce(c);
      const identifier = c.req.query("q")?.trim();
      if (!identifier || identifier.length > 320) {
        throw new HttpError(400, "bad_request", "Enter an email, phone or customer id.");
      }
      return c.html(
        await customerPage(deps, c.get("page"), {
          scope,
          identifier,
          heavyReads: options.heavyReads,
        }),
      );
    })
    .get("/app/customers/:identifier", session, async (c) => {
      const scope = requireCommerce(c);
      const identifier = c.req.param("identifier");
      if (identifier.length > 320) throw new HttpError(400, "bad_request", "identifier too long");
      return c.html(
        await customerPage(deps, c.get("page"), {
          scope,
          identifier,
          heavyReads: options.heavyReads,
        }),
      );
    })
    .get("/app/segments", session, async (c) => {
      const scope = requireScope(c);
      const offset = offsetOf(c.req.query("offset"));
      return c.html(
        await segmentsPage(deps, c.get("page"), { scope, offset, heavyReads: options.heavyReads }),
      );
    })
    .get("/app/segments/:id", session, async (c) => {
      const scope = requireScope(c);
      const segment = await getSegment(deps.sql, scope, c.req.param("id"));
      if (!segment) throw new HttpError(404, "not_found", "Segment not found");
      return c.html(await segmentPage(deps, c.get("page"), segment, options.heavyReads));
    })
    .get("/app/segments/:id/export", session, async (c) => {
      const scope = requireScope(c);
      const segment = await getSegment(deps.sql, scope, c.req.param("id"));
      if (!segment) throw new HttpError(404, "not_found", "Segment not found");
      // Every member, walked page by page as the API's cursor would, in one download.
      const lines = await openFullExport(deps.sql, segment, {
        pageSize: OFFSET_WINDOW,
        now: deps.now(),
        timeoutMs: deps.config.queryTimeoutMs,
        onClose: options.heavyReads.acquire(c.get("page").brand.brandId),
      });
      // Hono answers HEAD with GET's headers and drops the body unread: give it back now.
      if (c.req.method === "HEAD") {
        await lines.cancel();
        return c.body(null, 200);
      }
      c.header("Content-Type", "application/x-ndjson");
      c.header("Content-Disposition", `attachment; filename="${_fileName(segment.id)}.ndjson"`);
      return c.body(lines, 200);
    })
    .get("/app/destinations", session, async (c) => {
      return c.html(await destinationsPage(deps, c.get("page"), requireScope(c)));
    })
    .get("/app/privacy", session, async (c) => {
      requireScope(c);
      return c.html(await privacyPage(deps, c.get("page"), offsetOf(c.req.query("offset"))));
    })
    .get("/app/privacy/:id/download", session, async (c) => {
      requireScope(c);
      const id = c.req.param("id");
      const document = await exportDocument(deps.sql, c.get("page").brand.brandId, id);
      if (document === null) throw new HttpError(404, "not_found", "Export not found");
      c.header("Content-Type", "application/json");
      c.header("Content-Disposition", `attachment; filename="${_fileName(`export-${id}`)}.json"`);
      return c.body(document, 200);
    })
    .get("/app/keys", session, async (c) => c.html(await keysPage(deps, c.get("page"))))
    .post("/app/keys/issue", session, (c) =>
      keyAction(c, async (page, form) => {
        const name = _KeyName.safeParse(_field(form, "name") ?? "");
        if (!name.success) {
          return { kind: "error", status: 400, message: "The name is at most 100 characters." };
        }
        const issued = await issueApiKey(deps, {
          brandId: page.brand.brandId,
          name: name.data,
          expiresAt: null,
        });
        return { kind: "issued", key: issued.key, record: issued.record };
      }))
    .post("/app/keys/rotate", session, (c) =>
      keyAction(c, async (page, form) => {
        const rotated = await rotateApiKey(deps, {
          brandId: page.brand.brandId,
          keyId: keyId(form),
          graceMs: deps.config.keyRotationGraceSeconds * 1000,
        });
        if (rotated === null) return { kind: "error", status: 404, message: "Key not found." };
        if (rotated === "not_live") {
          return {
            kind: "error",
            status: 409,
            message: "The key is revoked or expired; issue a new one.",
          };
        }
        return {
          kind: "issued",
          key: rotated.key,
          record: rotated.record,
          previous: { id: rotated.previous.id, expires_at: rotated.previous.expires_at! },
        };
      }))
    .post("/app/keys/revoke", session, (c) =>
      keyAction(c, async (page, form) => {
        const revoked = await revokeApiKey(deps, {
          brandId: page.brand.brandId,
          keyId: keyId(form),
        });
        if (!revoked) return { kind: "error", status: 404, message: "Key not found." };
        return { kind: "revoked", record: revoked };
      }))
    .get("/app/health", session, async (c) => c.html(await healthPage(deps, c.get("page"))));
}

function _field(form: FormData, name: string): string | undefined {
  const value = form.get(name);
  return typeof value === "string" ? value : undefined;
}

function _fileName(segmentId: string): string {
  return segmentId.replace(/[^A-Za-z0-9_.-]/g, "_");
}
