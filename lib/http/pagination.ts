/**
 * Offset and cursor paging of list routes: limits, the page envelope and its OpenAPI schema.
 *
 * @module
 */
import { z } from "@hono/zod-openapi";
import { OFFSET_WINDOW } from "../store/offset_window.ts";
import { HttpError } from "./errors.ts";

// The window lives in lib/store, where lib/engine and lib/commerce count within it too.
export { countToWindow, OFFSET_WINDOW } from "../store/offset_window.ts";
/** Default and maximum page sizes. */
export const DEFAULT_LIMIT = 25;
export const MAX_LIMIT = 100;

/**
 * `limit`: an integer clamped to `max` (not rejected) as the contract says. With `clampLow` (the
 * segment export's `1..10000`) a value below 1 is clamped to 1 too; otherwise it is 400.
 */
export function limitParam(
  max = MAX_LIMIT,
  fallback = DEFAULT_LIMIT,
  options: { clampLow?: boolean } = {},
) {
  if (options.clampLow) {
    return z.coerce.number().int().optional()
      .transform((value) => Math.max(1, Math.min(value ?? fallback, max)))
      .openapi({
        type: "integer",
        default: fallback,
        example: Math.min(fallback, 10),
        description: `Page size, clamped to 1..${max}.`,
      });
  }
  return z.coerce.number().int().min(1).optional()
    .transform((value) => Math.min(value ?? fallback, max))
    .openapi({
      type: "integer",
      minimum: 1,
      default: fallback,
      example: Math.min(fallback, 10),
      description: `Page size; values above ${max} are clamped to ${max}.`,
    });
}

/** `offset`: a non-negative integer. */
export const offsetParam = z.coerce.number().int().min(0).optional().default(0).openapi({
  type: "integer",
  minimum: 0,
  default: 0,
  example: 0,
  description: `Rows to skip; offset + limit must stay within ${OFFSET_WINDOW}.`,
});

/** `cursor`: the opaque token of a previous page. */
export const cursorParam = z.string().min(1).max(200).optional().openapi({
  description: "Opaque token from a previous page's nextCursor; when present, offset is ignored.",
  example: "c_01KAB3M4Q9R8S7T6V5W4X3Y2Z1",
});

/** The standard query parameters of an offset-paged list. */
export const pageQuery = z.object({ limit: limitParam(), offset: offsetParam });

/** Throws 400 when the requested page reaches past the offset window. */
export function assertWithinWindow(page: { limit: number; offset: number }): void {
  if (page.offset + page.limit > OFFSET_WINDOW) {
    throw new HttpError(
      400,
      "bad_request",
      `offset + limit must not exceed ${OFFSET_WINDOW}; use the cursor to page further`,
    );
  }
}

/** The list envelope of paged answers. */
export interface Page<T> {
  list: T[];
  totalSize: number;
  offset: number;
  pageSize: number;
  nextCursor: string | null;
}

/** Shapes a page; `totalSize` is capped at the window, as the contract's estimates are. */
export function pageEnvelope<T>(input: {
  list: T[];
  totalSize: number;
  offset: number;
  limit: number;
  nextCursor?: string | null;
  capTotal?: boolean;
}): Page<T> {
  return {
    list: input.list,
    totalSize: input.capTotal === false
      ? input.totalSize
      : Math.min(input.totalSize, OFFSET_WINDOW),
    offset: input.offset,
    pageSize: input.limit,
    nextCursor: input.nextCursor ?? null,
  };
}

/** A page of an offset-only list (no cursor is minted): `result` as lib read functions return it. */
export function offsetPage<T>(
  result: { list: T[]; total: number },
  page: { offset: number; limit: number },
): Page<T> & { nextCursor: null } {
  return {
    ...pageEnvelope({
      list: result.list,
      totalSize: result.total,
      offset: page.offset,
      limit: page.limit,
    }),
    nextCursor: null,
  };
}

/** The zod schema of a page of `item`, for OpenAPI responses. */
export function pageSchema<T extends z.ZodType>(item: T) {
  return z.object({
    list: z.array(item),
    totalSize: z.number().int(),
    offset: z.number().int(),
    pageSize: z.number().int(),
    nextCursor: z.string().nullable(),
  });
}
