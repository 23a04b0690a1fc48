/**
 * Messages refused one by one inside an accepted ingest request (the Segment door answers 200
 * to the batch, and its SDKs never read the refusals in the body): each is counted per brand and
 * kept with its reasons and an excerpt for an operator, on the dashboard's health page and by
 * `deno task admin rejected list` (docs/operations.md). The excerpt never holds a `writeKey`.
 *
 * @module
 */
import type { Rejection } from "./edge.ts";
import { rejectedCountKey, rejectedMessageKey, rejectedMessagePrefix } from "../store/kv_keys.ts";

/** One refused message as kept. */
export interface RejectedMessage {
  /** A ULID: the list reads newest first. */
  id: string;
  /** The route it came through, e.g. `POST /v1/batch`. */
  door: string;
  at: string;
  /** Its index in the request's batch (0 for a single message). */
  index: number;
  errors: { path: string; message: string }[];
  /** The start of its JSON, as sent. */
  excerpt: string;
}

/** How long a refused message is kept. */
export const REJECTED_RETENTION_MS = 30 * 24 * 3_600_000;
/**
 * Refused messages kept per request; those past it are counted only. With at most 5 reasons
 * each and bounded texts, one request writes one KV commit well inside KV's 800 KB per commit,
 * whatever it sends.
 */
export const MAX_KEPT_PER_REQUEST = 50;
/** Characters of a message's JSON kept as its excerpt. */
export const EXCERPT_CHARS = 1_000;

/**
 * Counts a request's refused messages for the brand and keeps the first
 * {@linkcode MAX_KEPT_PER_REQUEST} with their reasons, in one atomic commit.
 */
export async function recordRejectedMessages(
  kv: Deno.Kv,
  request: { brandId: string; door: string; at: Date; newId: () => string },
  rejected: readonly Rejection[],
  messages: readonly unknown[],
): Promise<void> {
  if (rejected.length === 0) return;
  const op = kv.atomic().sum(rejectedCountKey(request.brandId), BigInt(rejected.length));
  for (const rejection of rejected.slice(0, MAX_KEPT_PER_REQUEST)) {
    const id = request.newId();
    const kept: RejectedMessage = {
      id,
      door: request.door,
      at: request.at.toISOString(),
      index: rejection.index,
      errors: rejection.errors.slice(0, 5).map((e) => ({
        path: e.path.slice(0, 200),
        message: e.message.slice(0, 300),
      })),
      excerpt: _excerpt(messages[rejection.index]),
    };
    op.set(rejectedMessageKey(request.brandId, id), kept, { expireIn: REJECTED_RETENTION_MS });
  }
  const result = await op.commit();
  if (!result.ok) throw new Error("the refused messages' commit failed");
}

/** How many messages of the brand were refused, ever. */
export async function rejectedCount(kv: Deno.Kv, brandId: string): Promise<number> {
  const entry = await kv.get<Deno.KvU64>(rejectedCountKey(brandId));
  return entry.value === null ? 0 : Number(entry.value.value);
}

/** The brand's kept refused messages, newest first, at most `limit`. */
export async function listRejectedMessages(
  kv: Deno.Kv,
  brandId: string,
  limit: number,
): Promise<RejectedMessage[]> {
  const out: RejectedMessage[] = [];
  const entries = kv.list<RejectedMessage>(
    { prefix: rejectedMessagePrefix(brandId) },
    { reverse: true, limit },
  );
  for await (const entry of entries) out.push(entry.value);
  return out;
}

// Without its writeKey: analytics.js sends the API key in the body.
function _excerpt(message: unknown): string {
  if (typeof message === "object" && message !== null && !Array.isArray(message)) {
    const { writeKey: _key, ...rest } = message as Record<string, unknown>;
    message = rest;
  }
  let text: string;
  try {
    text = JSON.stringify(message) ?? String(message);
  } catch {
    text = String(message);
  }
  return text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS - 1)}…` : text;
}
