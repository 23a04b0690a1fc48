/**
 * A small Shopify Admin GraphQL API on 127.0.0.1 for tests: it checks the path, API version,
 * method, content type and `X-Shopify-Access-Token`, parses the GraphQL document (selection sets
 * and arguments) and its variables, and answers `products(first, after)` and `product(id)` from
 * an in-memory catalog per shop with Shopify-like cursors, returning only the fields asked for.
 * Tests can queue scripted answers (throttling, errors) and count what reached it.
 */

/** A catalog product; ids are numeric, the API exposes them as GIDs. */
export interface FakeProduct {
  id: number;
  title: string;
  status?: string;
  vendor?: string;
  variants?: { id: number; price: string; sku: string | null; title?: string }[];
  images?: { id: number; url: string; altText: string | null }[];
}

/** A request that reached the fake and passed its protocol checks. */
export interface FakeRequest {
  /** The shop named in the path (`/shops/<shop>/admin/...`), when the origin carries one. */
  pathShop: string | null;
  /** The shop the token belongs to. */
  tokenShop: string;
  token: string;
  operation: "products" | "product";
  variables: Record<string, unknown>;
}

/** A scripted answer, used instead of the catalog for one request. */
export type Scripted = (request: FakeRequest) => Response | Promise<Response>;

export interface FakeAdminApi {
  /** `http://127.0.0.1:<port>`; use `${origin}/shops/{shop}` to have the shop in the path. */
  origin: string;
  apiVersion: string;
  /** Every request that passed the protocol checks (scripted or not). */
  requests: FakeRequest[];
  /** Protocol violations seen (wrong path, method, token, body); tests assert it stays empty. */
  violations: string[];
  /** Answers for the next requests, in order, before the catalog is used. */
  script: Scripted[];
  /** Adds fields outside the normalized shape to every product, as a newer API might. */
  extraFields: boolean;
  addShop(shop: string, token: string, products: FakeProduct[]): void;
  close(): Promise<void>;
}

/** `n` catalog products with ids 1001.. and two variants and one image each. */
export function catalog(n: number, idBase = 1000, titlePrefix = "Product"): FakeProduct[] {
  return Array.from({ length: n }, (_, i) => {
    const id = idBase + i + 1;
    return {
      id,
      title: `${titlePrefix} ${id}`,
      status: i % 3 === 2 ? "DRAFT" : "ACTIVE",
      vendor: "Acme",
      variants: [
        { id: id * 10 + 1, price: "19.99", sku: `SKU-${id}-S`, title: "S" },
        { id: id * 10 + 2, price: "21.00", sku: null, title: "M" },
      ],
      images: [{ id: id * 100, url: `https://cdn.example/${id}.png`, altText: null }],
    };
  });
}

/** The answer Shopify gives when the cost bucket cannot hold the query (HTTP 200). */
export function throttled(cost: { requested: number; available: number; rate: number }): Response {
  return Response.json({
    errors: [{
      message: "Throttled",
      extensions: {
        code: "THROTTLED",
        documentation: "https://shopify.dev/api/usage/rate-limits",
      },
    }],
    extensions: {
      cost: {
        requestedQueryCost: cost.requested,
        actualQueryCost: null,
        throttleStatus: {
          maximumAvailable: 2000,
          currentlyAvailable: cost.available,
          restoreRate: cost.rate,
        },
      },
    },
  });
}

/** HTTP 429 with an optional Retry-After. */
export function http429(retryAfter?: string): Response {
  return Response.json({
    errors:
      "Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service.",
  }, {
    status: 429,
    headers: retryAfter === undefined ? {} : { "Retry-After": retryAfter },
  });
}

/** A GraphQL ACCESS_DENIED error (the token lacks `read_products`). */
export function accessDenied(): Response {
  return Response.json({
    errors: [{
      message: "Access denied for products field. Required access: `read_products` access scope.",
      path: ["products"],
      extensions: { code: "ACCESS_DENIED", requiredAccess: "`read_products` access scope." },
    }],
    data: null,
  });
}

// ---- A very small GraphQL reader: enough of the grammar for the queries under test. ----------

interface Field {
  name: string;
  args: Record<string, { variable: string } | { literal: string | number }>;
  selections: Field[] | null;
}

function _tokens(source: string): string[] {
  const out: string[] = [];
  const re =
    /\s+|,|#[^\n]*|([{}():!$=\[\]])|([_A-Za-z][_0-9A-Za-z]*)|(-?\d+)|("(?:[^"\\]|\\.)*")/gy;
  let match: RegExpExecArray | null;
  while (re.lastIndex < source.length) {
    const start = re.lastIndex;
    match = re.exec(source);
    if (!match || re.lastIndex === start) throw new Error(`syntax error at ${start}`);
    const token = match[1] ?? match[2] ?? match[3] ?? match[4];
    if (token !== undefined) out.push(token);
  }
  return out;
}

/** Parses one `query Name($v: T, ...) { ... }` operation into its root selections. */
function _parseOperation(source: string): { variables: Record<string, string>; root: Field[] } {
  const tokens = _tokens(source);
  let i = 0;
  const peek = () => tokens[i];
  const take = (expected?: string) => {
    const token = tokens[i++];
    if (token === undefined || (expected !== undefined && token !== expected)) {
      throw new Error(`expected ${expected ?? "a token"}, got ${token}`);
    }
    return token;
  };
  const variables: Record<string, string> = {};
  take("query");
  if (peek() !== "(" && peek() !== "{") take();
  if (peek() === "(") {
    take("(");
    while (peek() !== ")") {
      take("$");
      const name = take();
      take(":");
      let type = take();
      while (peek() === "!" || peek() === "[" || peek() === "]") type += take();
      variables[name] = type;
    }
    take(")");
  }
  const selectionSet = (): Field[] => {
    take("{");
    const fields: Field[] = [];
    while (peek() !== "}") {
      const field: Field = { name: take(), args: {}, selections: null };
      if (peek() === "(") {
        take("(");
        while (peek() !== ")") {
          const arg = take();
          take(":");
          if (peek() === "$") {
            take("$");
            field.args[arg] = { variable: take() };
          } else {
            const raw = take();
            field.args[arg] = {
              literal: raw.startsWith('"') ? JSON.parse(raw) as string : Number(raw),
            };
          }
        }
        take(")");
      }
      if (peek() === "{") field.selections = selectionSet();
      fields.push(field);
    }
    take("}");
    return fields;
  };
  const root = selectionSet();
  if (i !== tokens.length) throw new Error("trailing tokens");
  return { variables, root };
}

class _GraphQLError extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
  }
}

function _arg(field: Field, name: string, variables: Record<string, unknown>): unknown {
  const arg = field.args[name];
  if (!arg) return undefined;
  return "variable" in arg ? variables[arg.variable] : arg.literal;
}

// Field resolution over plain objects, returning only what was selected (like GraphQL).
type Resolver = (field: Field) => unknown;
function _select(selections: Field[], type: string, resolvers: Record<string, Resolver>) {
  const out: Record<string, unknown> = {};
  for (const field of selections) {
    const resolve = resolvers[field.name];
    if (!resolve) throw new _GraphQLError(`Field '${field.name}' doesn't exist on type '${type}'`);
    out[field.name] = resolve(field);
  }
  return out;
}

function _leaf(field: Field, value: unknown): unknown {
  if (field.selections) throw new _GraphQLError(`Selections can't be made on '${field.name}'`);
  return value;
}

function _first(field: Field, variables: Record<string, unknown>): number {
  const first = _arg(field, "first", variables);
  if (typeof first !== "number" || !Number.isInteger(first) || first < 1 || first > 250) {
    throw new _GraphQLError(`'first' on '${field.name}' must be an integer from 1 to 250`);
  }
  return first;
}

function _connection<T>(
  field: Field,
  items: T[],
  node: (item: T, selections: Field[]) => unknown,
  pageInfo: { hasNextPage: boolean; endCursor: string | null },
) {
  if (!field.selections) throw new _GraphQLError(`Field '${field.name}' needs selections`);
  return _select(field.selections, `${field.name}Connection`, {
    nodes: (f) => items.map((item) => node(item, f.selections ?? [])),
    pageInfo: (f) =>
      _select(f.selections ?? [], "PageInfo", {
        hasNextPage: (g) => _leaf(g, pageInfo.hasNextPage),
        endCursor: (g) => _leaf(g, pageInfo.endCursor),
      }),
  });
}

function _cursor(id: number): string {
  return btoa(JSON.stringify({ last_id: id, last_value: String(id) }));
}

function _cursorId(cursor: string): number {
  try {
    const parsed = JSON.parse(atob(cursor));
    if (typeof parsed.last_id === "number") return parsed.last_id;
  } catch { /* fall through */ }
  throw new _GraphQLError("Invalid cursor for current pagination sort.", "BAD_USER_INPUT");
}

function _product(
  product: FakeProduct,
  selections: Field[],
  variables: Record<string, unknown>,
  extra: boolean,
) {
  const out = _select(selections, "Product", {
    id: (f) => _leaf(f, `gid://shopify/Product/${product.id}`),
    title: (f) => _leaf(f, product.title),
    status: (f) => _leaf(f, product.status ?? "ACTIVE"),
    vendor: (f) => _leaf(f, product.vendor ?? ""),
    variants: (f) => {
      const all = product.variants ?? [];
      const first = _first(f, variables);
      return _connection(
        f,
        all.slice(0, first),
        (v, sel) =>
          _select(sel, "ProductVariant", {
            id: (g) => _leaf(g, `gid://shopify/ProductVariant/${v.id}`),
            price: (g) => _leaf(g, v.price),
            sku: (g) => _leaf(g, v.sku),
            title: (g) => _leaf(g, v.title ?? ""),
          }),
        { hasNextPage: all.length > first, endCursor: null },
      );
    },
    images: (f) => {
      const all = product.images ?? [];
      const first = _first(f, variables);
      return _connection(
        f,
        all.slice(0, first),
        (image, sel) =>
          _select(sel, "Image", {
            id: (g) => _leaf(g, `gid://shopify/ProductImage/${image.id}`),
            url: (g) => _leaf(g, image.url),
            altText: (g) => _leaf(g, image.altText),
          }),
        { hasNextPage: all.length > first, endCursor: null },
      );
    },
  });
  if (extra) {
    Object.assign(out, { vendor: "Acme", descriptionHtml: "<p>x</p>", __typename: "Product" });
    const variants = out.variants as { nodes?: Record<string, unknown>[] } | undefined;
    for (const v of variants?.nodes ?? []) Object.assign(v, { inventoryQuantity: 7 });
  }
  return out;
}

/** Starts the fake on 127.0.0.1 on a free port. */
export function startFakeAdminApi(options: { apiVersion?: string } = {}): FakeAdminApi {
  const apiVersion = options.apiVersion ?? "2025-10";
  const shops = new Map<string, { shop: string; products: FakeProduct[] }>();
  const requests: FakeRequest[] = [];
  const violations: string[] = [];
  const script: Scripted[] = [];
  const unauthorized = () =>
    Response.json({
      errors: "[API] Invalid API key or access token (unrecognized login or wrong password)",
    }, { status: 401 });

  const fake: FakeAdminApi = {
    origin: "",
    apiVersion,
    requests,
    violations,
    script,
    extraFields: false,
    addShop(shop, token, products) {
      shops.set(token, { shop, products: [...products].sort((a, b) => a.id - b.id) });
    },
    close: () => server.shutdown(),
  };

  async function handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const match = url.pathname.match(/^(?:\/shops\/([^/]+))?\/admin\/api\/([^/]+)\/graphql\.json$/);
    if (!match) {
      violations.push(`path ${url.pathname}`);
      return Response.json({ errors: "Not Found" }, { status: 404 });
    }
    const pathShop = match[1] ?? null;
    if (match[2] !== apiVersion) violations.push(`version ${match[2]}`);
    if (req.method !== "POST") {
      violations.push(`method ${req.method}`);
      return Response.json({ errors: "Not Found" }, { status: 404 });
    }
    if (!req.headers.get("content-type")?.startsWith("application/json")) {
      violations.push(`content-type ${req.headers.get("content-type")}`);
    }
    const token = req.headers.get("x-shopify-access-token") ?? "";
    const owner = shops.get(token);
    if (!owner) {
      violations.push("unknown access token");
      return unauthorized();
    }
    if (pathShop !== null && pathShop !== owner.shop) {
      violations.push(`token of ${owner.shop} used for ${pathShop}`);
      return unauthorized();
    }
    let body: { query?: unknown; variables?: unknown };
    try {
      body = await req.json();
    } catch {
      violations.push("body is not JSON");
      return Response.json({ errors: "body is not JSON" }, { status: 400 });
    }
    const variables = (body.variables ?? {}) as Record<string, unknown>;
    if (typeof body.query !== "string" || typeof variables !== "object") {
      violations.push("no query");
      return Response.json({ errors: [{ message: "No query string was present" }] });
    }
    let operation: ReturnType<typeof _parseOperation>;
    try {
      operation = _parseOperation(body.query);
    } catch (err) {
      violations.push(`unparseable query: ${(err as Error).message}`);
      return Response.json({ errors: [{ message: `Parse error: ${(err as Error).message}` }] });
    }
    for (const name of Object.keys(variables)) {
      if (!(name in operation.variables)) violations.push(`undeclared variable ${name}`);
    }
    const [root] = operation.root;
    if (!root || operation.root.length !== 1 || !["products", "product"].includes(root.name)) {
      violations.push(`unexpected root ${operation.root.map((f) => f.name).join(",")}`);
      return Response.json({ errors: [{ message: "unexpected operation" }] });
    }
    const request: FakeRequest = {
      pathShop,
      tokenShop: owner.shop,
      token,
      operation: root.name as "products" | "product",
      variables,
    };
    requests.push(request);
    const scripted = script.shift();
    if (scripted) return await scripted(request);

    const cost = {
      cost: {
        requestedQueryCost: 12,
        actualQueryCost: 4,
        throttleStatus: { maximumAvailable: 2000, currentlyAvailable: 1996, restoreRate: 100 },
      },
    };
    try {
      let data: Record<string, unknown>;
      if (root.name === "products") {
        const first = _first(root, variables);
        const after = _arg(root, "after", variables);
        const start = typeof after === "string"
          ? (() => {
            const lastId = _cursorId(after);
            const index = owner.products.findIndex((p) => p.id > lastId);
            return index === -1 ? owner.products.length : index;
          })()
          : 0;
        const items = owner.products.slice(start, start + first);
        const last = items.at(-1);
        data = {
          products: _connection(
            root,
            items,
            (p, sel) => _product(p, sel, variables, fake.extraFields),
            {
              hasNextPage: start + first < owner.products.length,
              endCursor: last ? _cursor(last.id) : null,
            },
          ),
        };
      } else {
        const id = _arg(root, "id", variables);
        const numeric = typeof id === "string" && id.match(/^gid:\/\/shopify\/Product\/(\d+)$/);
        if (!numeric) {
          throw new _GraphQLError(
            `Invalid global id '${String(id)}'`,
            "argumentLiteralsIncompatible",
          );
        }
        const product = owner.products.find((p) => p.id === Number(numeric[1]));
        data = {
          product: product && root.selections
            ? _product(product, root.selections, variables, fake.extraFields)
            : null,
        };
      }
      return Response.json({ data, extensions: cost });
    } catch (err) {
      if (!(err instanceof _GraphQLError)) throw err;
      return Response.json({
        errors: [{ message: err.message, extensions: err.code ? { code: err.code } : {} }],
        extensions: cost,
      });
    }
  }

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handle);
  fake.origin = `http://127.0.0.1:${server.addr.port}`;
  return fake;
}
