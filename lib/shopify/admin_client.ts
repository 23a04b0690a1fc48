/**
 * The Shopify Admin GraphQL API client: transport, cost-based throttle handling, error mapping
 * (to domain errors) and product normalization. The access token is only sent in
 * `X-Shopify-Access-Token`; neither it nor the raw payload ever leaves this module. The brand's
 * cached product reads over it are lib/shopify/product_reads.ts.
 *
 * @module
 */
import { z } from "zod";
import type { Config } from "../config.ts";
import { DomainError } from "../errors.ts";

/** A product variant, normalized. */
export interface ProductVariant {
  id: string;
  /** Decimal money string, as Shopify sends it (`"19.99"`). */
  price: string;
  sku: string | null;
}

/** A product image, normalized. */
export interface ProductImage {
  id: string;
  url: string;
  altText: string | null;
}

/** A product, normalized. Ids are the numeric tail of Shopify's GIDs. */
export interface Product {
  id: string;
  title: string;
  status: string;
  variants: ProductVariant[];
  images: ProductImage[];
}

/** One page of products; `nextCursor` is Shopify's `endCursor` while `hasNextPage`. */
export interface ProductPage {
  list: Product[];
  nextCursor: string | null;
}

/** Where and as whom to call the Admin API. */
export interface ShopifyCredentials {
  shop: string;
  accessToken: string;
}

/** The Admin API operations the service uses. Errors are thrown as DomainError. */
export interface ShopifyAdmin {
  listProducts(
    credentials: ShopifyCredentials,
    page: { first: number; after?: string },
  ): Promise<ProductPage>;
  /** `id` is the numeric product id; null when Shopify has no such product. */
  getProduct(credentials: ShopifyCredentials, id: string): Promise<Product | null>;
}

/** Any Admin GraphQL call: its `data`, with the client's throttle retries and error mapping. */
export interface ShopifyGraphql {
  /** `forbidden` words the 403 a 401/403 or `ACCESS_DENIED` answer becomes. */
  graphql(
    credentials: ShopifyCredentials,
    query: string,
    variables: Record<string, unknown>,
    forbidden: string,
  ): Promise<unknown>;
}

/** How the client reaches Shopify; everything but the address has a default. */
export interface ShopifyAdminOptions {
  /** `SHOPIFY_ADMIN_ORIGIN`; `{shop}` is replaced by the shop domain. */
  adminOrigin: string;
  apiVersion: string;
  /** Retries after a throttled answer (THROTTLED or HTTP 429); default 2. */
  maxRetries?: number;
  /** Longest single wait between attempts; default 2000 ms. */
  maxWaitMs?: number;
  /** Per-attempt deadline (request and body); default 10,000 ms. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
}

/** Variants and images read per product (Shopify pages them; beyond these they are cut off). */
export const MAX_VARIANTS = 100;
export const MAX_IMAGES = 20;

const _PRODUCT_FIELDS = `
  id
  title
  status
  variants(first: ${MAX_VARIANTS}) { nodes { id price sku } }
  images(first: ${MAX_IMAGES}) { nodes { id url altText } }`;

/** The list query: one page of products in Shopify's default order (by id). */
export const PRODUCTS_QUERY = `query Products($first: Int!, $after: String) {
  products(first: $first, after: $after) {
    nodes {${_PRODUCT_FIELDS}
    }
    pageInfo { hasNextPage endCursor }
  }
}`;

/** The single-product query, by GID. */
export const PRODUCT_QUERY = `query Product($id: ID!) {
  product(id: $id) {${_PRODUCT_FIELDS}
  }
}`;

// What the normalizer reads; anything else Shopify sends is ignored.
const _RawProduct = z.object({
  id: z.string(),
  title: z.string(),
  status: z.string(),
  variants: z.object({
    nodes: z.array(z.object({
      id: z.string(),
      price: z.union([z.string(), z.number()]),
      sku: z.string().nullable().optional(),
    })),
  }),
  images: z.object({
    nodes: z.array(z.object({
      id: z.string(),
      url: z.string(),
      altText: z.string().nullable().optional(),
    })),
  }),
});
const _ProductsData = z.object({
  products: z.object({
    nodes: z.array(_RawProduct),
    pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.string().nullable().optional() }),
  }),
});
const _ProductData = z.object({ product: _RawProduct.nullable() });

/** The numeric tail of a GID (`gid://shopify/ProductVariant/808950810?x=1` → `808950810`). */
export function gidTail(gid: string): string {
  const match = gid.match(/^gid:\/\/shopify\/[A-Za-z]+\/([^/?#]+)/);
  return match ? match[1]! : gid;
}

/** A product id from the path: digits, or `gid://shopify/Product/<digits>`; null otherwise. */
export function parseProductId(input: string): string | null {
  const match = input.match(/^(?:gid:\/\/shopify\/Product\/)?([0-9]{1,20})$/);
  return match ? match[1]! : null;
}

function _normalize(raw: z.infer<typeof _RawProduct>): Product {
  return {
    id: gidTail(raw.id),
    title: raw.title,
    status: raw.status,
    variants: raw.variants.nodes.map((v) => ({
      id: gidTail(v.id),
      price: String(v.price),
      sku: v.sku ?? null,
    })),
    images: raw.images.nodes.map((i) => ({
      id: gidTail(i.id),
      url: i.url,
      altText: i.altText ?? null,
    })),
  };
}

/** Why a product read is refused: the token Shopify holds for the shop cannot read products. */
export const PRODUCTS_FORBIDDEN = "The storefront token cannot read products";

class _Throttled {
  constructor(readonly waitMs: number) {}
}

/** Builds the Admin API client. */
export function createShopifyAdmin(
  options: ShopifyAdminOptions,
): ShopifyAdmin & ShopifyGraphql {
  const maxRetries = options.maxRetries ?? 2;
  const maxWaitMs = options.maxWaitMs ?? 2000;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  const sleep = options.sleep ??
    ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));

  const endpoint = (shop: string) =>
    `${options.adminOrigin.replaceAll("{shop}", shop).replace(/\/+$/, "")}/admin/api/${
      encodeURIComponent(options.apiVersion)
    }/graphql.json`;

  /** One POST; returns `data`, or a _Throttled, or throws the mapped DomainError. */
  async function attempt(
    credentials: ShopifyCredentials,
    query: string,
    variables: Record<string, unknown>,
    forbidden: string,
  ): Promise<unknown> {
    let res: Response;
    let text: string;
    try {
      res = await doFetch(endpoint(credentials.shop), {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "Accept": "application/json",
          "X-Shopify-Access-Token": credentials.accessToken,
        },
        body: JSON.stringify({ query, variables }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const timedOut = err instanceof DOMException &&
        (err.name === "TimeoutError" || err.name === "AbortError");
      throw new DomainError(
        "upstream_failed",
        timedOut ? `Shopify did not answer within ${timeoutMs} ms` : "Shopify could not be reached",
        { cause: new Error(`shopify request failed: ${describeError(err)}`) },
      );
    }
    if (res.status === 429) return new _Throttled(_retryAfterMs(res.headers.get("retry-after")));
    if (res.status === 401 || res.status === 403) throw new DomainError("forbidden", forbidden);
    if (res.status < 200 || res.status > 299) {
      throw new DomainError("upstream_failed", `Shopify answered HTTP ${res.status}`);
    }
    let body: { data?: unknown; errors?: unknown; extensions?: unknown };
    try {
      body = JSON.parse(text);
      if (body === null || typeof body !== "object") throw new Error("not an object");
    } catch {
      throw new DomainError("upstream_failed", "Shopify answered with malformed JSON");
    }
    if (body.errors !== undefined && body.errors !== null) {
      const errors = Array.isArray(body.errors) ? body.errors : [body.errors];
      const codes = errors.map((e) => (e as { extensions?: { code?: unknown } })?.extensions?.code);
      const messages = errors.map((e) => String((e as { message?: unknown })?.message ?? e));
      if (codes.includes("THROTTLED")) return new _Throttled(_costWaitMs(body.extensions));
      if (codes.includes("ACCESS_DENIED")) throw new DomainError("forbidden", forbidden);
      if (variables.after !== undefined && messages.some((m) => /cursor/i.test(m))) {
        throw new DomainError("invalid_input", "invalid cursor");
      }
      throw new DomainError("upstream_failed", "Shopify answered with an error", {
        cause: new Error(`shopify graphql errors: ${codes.join(",")}`),
      });
    }
    return body.data;
  }

  /** Attempts, retrying throttled answers up to maxRetries times; then 429 with Retry-After. */
  async function call(
    credentials: ShopifyCredentials,
    query: string,
    variables: Record<string, unknown>,
    forbidden = PRODUCTS_FORBIDDEN,
  ): Promise<unknown> {
    for (let retry = 0;; retry++) {
      const outcome = await attempt(credentials, query, variables, forbidden);
      if (!(outcome instanceof _Throttled)) return outcome;
      if (retry >= maxRetries) {
        const seconds = Math.max(1, Math.ceil(outcome.waitMs / 1000));
        throw new DomainError("throttled", "Shopify is throttling this shop; retry later", {
          retryAfterSeconds: seconds,
        });
      }
      await sleep(Math.min(outcome.waitMs, maxWaitMs));
    }
  }

  function parse<T extends z.ZodType>(schema: T, data: unknown): z.infer<T> {
    const parsed = schema.safeParse(data);
    if (!parsed.success) {
      throw new DomainError("upstream_failed", "Shopify answered with an unexpected shape");
    }
    return parsed.data;
  }

  return {
    graphql: call,
    async listProducts(credentials, page) {
      const variables = { first: page.first, ...(page.after ? { after: page.after } : {}) };
      const data = parse(_ProductsData, await call(credentials, PRODUCTS_QUERY, variables));
      const { nodes, pageInfo } = data.products;
      return {
        list: nodes.map(_normalize),
        nextCursor: pageInfo.hasNextPage ? (pageInfo.endCursor ?? null) : null,
      };
    },
    async getProduct(credentials, id) {
      const variables = { id: `gid://shopify/Product/${id}` };
      const data = parse(_ProductData, await call(credentials, PRODUCT_QUERY, variables));
      return data.product ? _normalize(data.product) : null;
    },
  };
}

/** The client the config describes (`SHOPIFY_ADMIN_ORIGIN`, `_API_VERSION`, `_MAX_RETRIES`). */
export function shopifyAdminFromConfig(
  config: Config,
  extra: Partial<ShopifyAdminOptions> = {},
): ShopifyAdmin & ShopifyGraphql {
  return createShopifyAdmin({
    adminOrigin: config.shopify.adminOrigin,
    apiVersion: config.shopify.apiVersion,
    maxRetries: config.shopifyMaxRetries,
    ...extra,
  });
}

// Cost-based throttle: wait until the bucket holds the requested cost again.
function _costWaitMs(extensions: unknown): number {
  const cost = (extensions as { cost?: Record<string, unknown> } | undefined)?.cost;
  const status = cost?.throttleStatus as Record<string, unknown> | undefined;
  const requested = Number(cost?.requestedQueryCost);
  const available = Number(status?.currentlyAvailable);
  const rate = Number(status?.restoreRate);
  if (![requested, available, rate].every(Number.isFinite) || rate <= 0) return 1000;
  return Math.max(0, Math.ceil(((requested - available) / rate) * 1000));
}

// HTTP 429: Retry-After in (possibly fractional) seconds; 1 s when absent or unreadable.
function _retryAfterMs(header: string | null): number {
  const seconds = header === null ? NaN : Number(header.trim());
  return Number.isFinite(seconds) && seconds >= 0 ? Math.ceil(seconds * 1000) : 1000;
}

/** An error in one line, for logs and causes. */
export function describeError(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
