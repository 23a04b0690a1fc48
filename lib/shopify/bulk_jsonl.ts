/**
 * Reading a bulk operation's JSONL: one object a line, a nested connection's objects on lines of
 * their own naming their parent in `__parentId` (bulk_mapping.ts maps the objects).
 *
 * **Children in any order, memory bounded.** Since API 2026-01 bulk queries default to
 * `groupObjects: false`, and even grouped output never promised that a child follows its parent
 * closely: a line item may come before its order, or anywhere after it. An order's items must all
 * be known before it is written (they are stored on its row), so the reader cannot emit an order
 * before the file ends, and holding every order until then is the whole file in memory. Instead it
 * reads the file twice, as a hash join would: the first pass streams the download into partition
 * files on local disk, each line going to the partition of its order (its own id, or its
 * `__parentId`), without parsing it; the second pass reads one partition at a time, groups it and
 * emits its orders. An order and all its items land in one partition, so each partition is
 * complete on its own, and memory holds one partition: the operation's `objectCount` divided by
 * the partition count, about 10,000 objects whatever the file's size. Buffering orphans in memory
 * until their parent arrives would be bounded only when children stay near their parents, which
 * ungrouped output does not promise. The disk holds the file once, removed when reading ends.
 *
 * @module
 */
import { type ImportRecord, streamLines } from "../commerce/import.ts";
import { gidNumber, gidType, mapBulkCustomer, mapBulkOrder } from "./bulk_mapping.ts";
import type { Payload } from "./order_mapping.ts";

/** How {@linkcode bulkOrderRecords} partitions. */
export interface BulkReadOptions {
  /** The operation's `objectCount` (every line), which sizes the partitions. */
  objectCount: number;
  /** Objects per partition aimed at (default 10,000): what the second pass holds at once. */
  objectsPerPartition?: number;
  /** Where partition files go (default the system's temporary directory). */
  tempDir?: string;
  /** Told the running count of lines read from the download. */
  onRead?: (lines: number) => void;
}

/** Partition files open at once at most (each holds a small write buffer). */
const _MAX_PARTITIONS = 1024;
/** Characters buffered per partition before they are written. */
const _FLUSH_CHARS = 32_768;
const _PARENT = '"__parentId":"';

/**
 * The order line candidates of an orders bulk JSONL (bulk_mapping.ts), each numbered by its
 * order's line in the file, for lib/commerce/import.ts. A line that is not JSON, and a line item
 * whose order is not in the file, become records with errors.
 */
export async function* bulkOrderRecords(
  stream: ReadableStream<Uint8Array>,
  options: BulkReadOptions,
): AsyncGenerator<ImportRecord> {
  const count = Math.min(
    _MAX_PARTITIONS,
    Math.max(1, Math.ceil(options.objectCount / (options.objectsPerPartition ?? 10_000))),
  );
  const dir = await Deno.makeTempDir({ dir: options.tempDir, prefix: "shop_sync_" });
  try {
    const written = await _partition(stream, dir, count, options.onRead);
    for (let p = 0; p < count; p++) {
      if (!written[p]) continue;
      const text = await Deno.readTextFile(`${dir}/${p}`);
      await Deno.remove(`${dir}/${p}`);
      yield* _groupPartition(text);
    }
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** First pass: each line, prefixed by its number, appended to its order's partition file. */
async function _partition(
  stream: ReadableStream<Uint8Array>,
  dir: string,
  count: number,
  onRead: ((lines: number) => void) | undefined,
): Promise<boolean[]> {
  const encoder = new TextEncoder();
  const files: (Deno.FsFile | undefined)[] = new Array(count);
  const buffers: string[] = new Array(count).fill("");
  const written: boolean[] = new Array(count).fill(false);
  const flush = async (p: number) => {
    const file = files[p] ??= await Deno.open(`${dir}/${p}`, { write: true, create: true });
    const bytes = encoder.encode(buffers[p]);
    buffers[p] = "";
    for (let offset = 0; offset < bytes.length;) {
      offset += await file.write(bytes.subarray(offset));
    }
  };
  try {
    let line = 0;
    for await (const text of streamLines(stream)) {
      line++;
      if (line % 10_000 === 0) onRead?.(line);
      if (text.trim() === "") continue;
      const p = _partitionOf(text, count);
      buffers[p] += `${line}\t${text}\n`;
      written[p] = true;
      if (buffers[p]!.length >= _FLUSH_CHARS) await flush(p);
    }
    onRead?.(line);
    for (let p = 0; p < count; p++) if (buffers[p]) await flush(p);
  } finally {
    for (const file of files) file?.close();
  }
  return written;
}

/**
 * The partition of a line: by the digits ending its order's GID, read without parsing the line
 * (Shopify writes `__parentId` last and `id` first; a slash may come escaped, digits never do).
 */
function _partitionOf(text: string, count: number): number {
  let key: string | undefined;
  const parent = text.lastIndexOf(_PARENT);
  if (parent >= 0) {
    const start = parent + _PARENT.length;
    key = text.slice(start, text.indexOf('"', start));
  } else if (text.startsWith('{"id":"')) {
    key = text.slice(7, text.indexOf('"', 7));
  } else {
    try {
      key = String((JSON.parse(text) as Payload)?.id ?? "");
    } catch {
      return 0;
    }
  }
  const digits = /(\d{1,9})$/.exec(key)?.[1];
  return digits ? Number(digits) % count : 0;
}

interface _Order {
  line: number;
  order: Payload;
  items: Payload[];
}

/** Second pass over one partition: its orders with their items, in the order of their lines. */
function* _groupPartition(text: string): Generator<ImportRecord> {
  const orders = new Map<string, _Order>();
  const orphans = new Map<string, { line: number; item: Payload }[]>();
  const bad: ImportRecord[] = [];
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    const tab = text.indexOf("\t", start);
    const line = Number(text.slice(start, tab));
    const json = text.slice(tab + 1, end);
    start = end + 1;
    let value: Payload;
    try {
      value = JSON.parse(json);
      if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error();
    } catch {
      bad.push({ line, errors: ["not a JSON object"] });
      continue;
    }
    const parentId = value.__parentId;
    if (typeof parentId === "string") {
      const parentNumber = gidNumber(parentId) ?? parentId;
      const parent = orders.get(parentNumber);
      if (parent) parent.items.push(value);
      else {
        const waiting = orphans.get(parentNumber);
        if (waiting) waiting.push({ line, item: value });
        else orphans.set(parentNumber, [{ line, item: value }]);
      }
      continue;
    }
    if (gidType(value.id) !== "Order") {
      bad.push({ line, errors: [`not an order: ${String(value.id)}`] });
      continue;
    }
    const number = gidNumber(value.id)!;
    if (orders.has(number)) {
      bad.push({ line, errors: [`order ${number} appears twice`] });
      continue;
    }
    const entry: _Order = { line, order: value, items: [] };
    // Children read before their parent go first: they came first in the file.
    const early = orphans.get(number);
    if (early) {
      orphans.delete(number);
      entry.items = early.map((o) => o.item);
    }
    orders.set(number, entry);
  }
  for (const record of bad) yield record;
  for (const [parent, items] of orphans) {
    for (const { line } of items) {
      yield { line, errors: [`line item of order ${parent}, which is not in the file`] };
    }
  }
  for (const entry of orders.values()) {
    yield { line: entry.line, value: mapBulkOrder(entry.order, entry.items) };
  }
}

/** The customers of a customers bulk JSONL (no children), streamed line by line. */
export async function* bulkCustomerRecords(
  stream: ReadableStream<Uint8Array>,
  onRead?: (lines: number) => void,
): AsyncGenerator<ImportRecord> {
  let line = 0;
  for await (const text of streamLines(stream)) {
    line++;
    if (line % 10_000 === 0) onRead?.(line);
    if (text.trim() === "") continue;
    let value: Payload;
    try {
      value = JSON.parse(text);
    } catch {
      yield { line, errors: ["not valid JSON"] };
      continue;
    }
    const mapped = value && typeof value === "object" ? mapBulkCustomer(value) : null;
    yield mapped ? { line, value: mapped } : { line, errors: ["not a customer with an id"] };
  }
  onRead?.(line);
}
