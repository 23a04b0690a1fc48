/**
 * Shopify's bulk query sequence on 127.0.0.1, for tests and the backfill benchmark: the
 * `bulkOperationRunQuery` mutation (one operation at a time per shop, or a scripted userError),
 * `currentBulkOperation` advancing CREATED → RUNNING → the scripted end after a few polls, and
 * the operation's JSONL served at its `url` (streamed, so a generated file never sits in memory).
 * It checks the path, API version, method and `X-Shopify-Access-Token`; violations are listed.
 * Also: generators of Shopify-shaped JSONL (orders with line item children, customers).
 */

/** What a bulk query's file holds, by the connection it reads (`orders` or `customers`). */
export type BulkFile = () => string | ReadableStream<Uint8Array>;

/** How an operation ends. */
export interface BulkOutcome {
  status: "COMPLETED" | "FAILED" | "CANCELED" | "EXPIRED";
  errorCode?: string;
}

/** A request that reached the fake. */
export interface BulkRequest {
  operation: "run" | "current" | "download";
  /** The bulk query text of a `run`. */
  query?: string;
}

export interface FakeBulkApi {
  origin: string;
  apiVersion: string;
  requests: BulkRequest[];
  violations: string[];
  /** The file of each connection; a connection without one answers an empty file. */
  files: Partial<Record<"orders" | "customers", BulkFile>>;
  /** The `objectCount` an operation of this connection ends with (default 1,000 a poll). */
  objectCounts: Partial<Record<"orders" | "customers", number>>;
  /** Polls answered CREATED/RUNNING before the end (default 2). */
  pollsUntilDone: number;
  /** Ends of the next operations, in order; COMPLETED once the list is empty. */
  outcomes: BulkOutcome[];
  /** userErrors for the next mutations, in order. */
  userErrors: string[];
  /** Called when a poll is answered (a test may act while an operation runs); throwing answers 503. */
  onPoll?: (id: string, status: string) => void | Promise<void>;
  close(): Promise<void>;
}

interface _Op {
  id: string;
  kind: "orders" | "customers";
  polls: number;
  status: string;
  outcome: BulkOutcome;
  objectCount: number;
}

/** Starts the fake for one shop's token. */
export function startFakeBulkApi(token: string, apiVersion = "2025-10"): FakeBulkApi {
  const ops: _Op[] = [];
  let nextId = 4_100_000;
  const api: FakeBulkApi = {
    origin: "",
    apiVersion,
    requests: [],
    violations: [],
    files: {},
    objectCounts: {},
    pollsUntilDone: 2,
    outcomes: [],
    userErrors: [],
    close: () => server.shutdown(),
  };
  const current = () => ops[ops.length - 1];
  const view = (op: _Op) => ({
    id: op.id,
    status: op.status,
    errorCode: op.status === "COMPLETED" ? null : (op.outcome.errorCode ?? null),
    objectCount: String(
      op.status === "COMPLETED" ? (api.objectCounts[op.kind] ?? op.objectCount) : op.objectCount,
    ),
    fileSize: null,
    url: op.status === "COMPLETED" ? `${api.origin}/bulk/${op.id.split("/").pop()}.jsonl` : null,
    partialDataUrl: null,
    createdAt: "2026-11-24T12:00:00Z",
    completedAt: ["COMPLETED", "FAILED", "CANCELED", "EXPIRED"].includes(op.status)
      ? "2026-11-24T12:01:00Z"
      : null,
  });
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const download = /^\/bulk\/(\d+)\.jsonl$/.exec(url.pathname);
    if (download && req.method === "GET") {
      api.requests.push({ operation: "download" });
      const op = ops.find((o) => o.id.endsWith(`/${download[1]}`));
      if (!op || op.status !== "COMPLETED") return new Response("no such file", { status: 404 });
      const body = api.files[op.kind]?.() ?? "";
      return new Response(body, { headers: { "Content-Type": "application/jsonl" } });
    }
    if (url.pathname !== `/admin/api/${apiVersion}/graphql.json` || req.method !== "POST") {
      api.violations.push(`${req.method} ${url.pathname}`);
      return new Response("not found", { status: 404 });
    }
    if (req.headers.get("x-shopify-access-token") !== token) {
      api.violations.push("wrong or missing X-Shopify-Access-Token");
      return Response.json({ errors: "[API] Invalid API key or access token" }, { status: 401 });
    }
    const body = await req.json() as { query?: string; variables?: Record<string, unknown> };
    const text = body.query ?? "";
    if (text.includes("bulkOperationRunQuery")) {
      const query = String(body.variables?.query ?? "");
      api.requests.push({ operation: "run", query });
      const scripted = api.userErrors.shift();
      const running = current();
      const message = scripted ??
        (running && ["CREATED", "RUNNING"].includes(running.status)
          ? `A bulk query operation for this app and shop is already in progress: ${running.id}.`
          : undefined);
      if (message) {
        return Response.json({
          data: {
            bulkOperationRunQuery: { bulkOperation: null, userErrors: [{ field: null, message }] },
          },
        });
      }
      const kind = /^\s*\{\s*customers\b/.test(query) ? "customers" : "orders";
      const op: _Op = {
        id: `gid://shopify/BulkOperation/${nextId++}`,
        kind,
        polls: 0,
        status: "CREATED",
        outcome: api.outcomes.shift() ?? { status: "COMPLETED" },
        objectCount: 0,
      };
      ops.push(op);
      return Response.json({
        data: {
          bulkOperationRunQuery: {
            bulkOperation: { id: op.id, status: op.status },
            userErrors: [],
          },
        },
      });
    }
    if (text.includes("currentBulkOperation")) {
      api.requests.push({ operation: "current" });
      const op = current();
      if (op && ["CREATED", "RUNNING"].includes(op.status)) {
        op.polls++;
        op.objectCount += 1000;
        op.status = op.polls > api.pollsUntilDone ? op.outcome.status : "RUNNING";
      }
      try {
        if (op) await api.onPoll?.(op.id, op.status);
      } catch {
        return new Response("unavailable", { status: 503 });
      }
      return Response.json({ data: { currentBulkOperation: op ? view(op) : null } });
    }
    api.violations.push(`unexpected GraphQL document: ${text.slice(0, 80)}`);
    return Response.json({ errors: [{ message: "unexpected document" }] });
  });
  api.origin = `http://127.0.0.1:${server.addr.port}`;
  return api;
}

/**
 * A Shopify Order object of the bulk file (GraphQL shape), with `extra` fields over it; its
 * customer is one of `customers` (500,000 + n mod customers).
 */
export function bulkOrder(
  n: number,
  extra: Record<string, unknown> = {},
  customers = 1000,
): Record<string, unknown> {
  const customer = 500_000 + (n % customers);
  return {
    id: `gid://shopify/Order/${n}`,
    name: `#${n}`,
    email: `c${customer}@example.com`,
    phone: null,
    createdAt: "2025-03-01T10:00:00Z",
    updatedAt: "2025-03-02T10:00:00Z",
    processedAt: "2025-03-01T10:00:01Z",
    cancelledAt: null,
    closedAt: null,
    currencyCode: "USD",
    totalPriceSet: { shopMoney: { amount: "60.1", currencyCode: "USD" } },
    subtotalPriceSet: { shopMoney: { amount: "55.1", currencyCode: "USD" } },
    totalTaxSet: { shopMoney: { amount: "5.0", currencyCode: "USD" } },
    totalDiscountsSet: { shopMoney: { amount: "0.0", currencyCode: "USD" } },
    displayFinancialStatus: "PAID",
    displayFulfillmentStatus: "FULFILLED",
    customer: {
      id: `gid://shopify/Customer/${customer}`,
      email: `C${customer}@Example.com`,
      phone: null,
      firstName: "Cee",
      lastName: `${customer}`,
    },
    ...extra,
  };
}

/** A LineItem child of order `n` (its `i`-th). */
export function bulkLineItem(n: number, i: number): Record<string, unknown> {
  return {
    id: `gid://shopify/LineItem/${n * 10 + i}`,
    title: `Tee ${i}`,
    quantity: i + 1,
    sku: `TEE-${i}`,
    variantTitle: i === 0 ? "M" : null,
    originalUnitPriceSet: {
      shopMoney: { amount: i === 0 ? "30.05" : "29.99", currencyCode: "USD" },
    },
    variant: { id: `gid://shopify/ProductVariant/${800 + i}` },
    product: { id: `gid://shopify/Product/${700 + i}` },
    __parentId: `gid://shopify/Order/${n}`,
  };
}

/** A Customer object of the bulk file. */
export function bulkCustomer(
  n: number,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id: `gid://shopify/Customer/${n}`,
    email: `C${n}@Example.com`,
    phone: null,
    firstName: "Cee",
    lastName: `${n}`,
    createdAt: "2024-01-01T00:00:00Z",
    updatedAt: "2025-01-01T00:00:00Z",
    ...extra,
  };
}

/** One JSONL line as Shopify writes it: slashes escaped. */
export function jsonl(object: unknown): string {
  return `${JSON.stringify(object).replaceAll("/", "\\/")}\n`;
}

/**
 * Orders `first`..`first + count - 1` with two line items each, generated as they are read
 * (never held whole). `childrenFirst` puts every other order's items before it, and one item of
 * each order far after it (`lag` orders later), as ungrouped output may.
 */
export function generatedOrders(
  count: number,
  options: { first?: number; childrenFirst?: boolean; lag?: number } = {},
): ReadableStream<Uint8Array> {
  const first = options.first ?? 1;
  const lag = options.lag ?? 0;
  const encoder = new TextEncoder();
  let n = 0;
  return new ReadableStream({
    pull(controller) {
      if (n >= count + lag) {
        controller.close();
        return;
      }
      let text = "";
      for (let k = 0; k < 200 && n < count + lag; k++, n++) {
        const id = first + n;
        if (n < count) {
          const before = options.childrenFirst && n % 2 === 0;
          if (before) text += jsonl(bulkLineItem(id, 0));
          text += jsonl(bulkOrder(id));
          if (!before) text += jsonl(bulkLineItem(id, 0));
          if (lag === 0) text += jsonl(bulkLineItem(id, 1));
        }
        if (lag > 0 && n >= lag) text += jsonl(bulkLineItem(first + n - lag, 1));
      }
      controller.enqueue(encoder.encode(text));
    },
  });
}

/** Customers `first`..`first + count - 1`, generated as they are read. */
export function generatedCustomers(count: number, first = 500_000): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let n = 0;
  return new ReadableStream({
    pull(controller) {
      if (n >= count) {
        controller.close();
        return;
      }
      let text = "";
      for (let k = 0; k < 500 && n < count; k++, n++) text += jsonl(bulkCustomer(first + n));
      controller.enqueue(encoder.encode(text));
    },
  });
}
