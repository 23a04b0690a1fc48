/**
 * Reading a bulk operation's JSONL: one object a line, a nested connection's objects on lines of
 * their own naming their parent in `__parentId` (bulk_mapping.ts maps the objects).
 *
 * **Children in any order, memory bounded.** Since API 2026-01 bulk queries default to
 * `groupObjects: false`, and even grouped output never promised that a child follows its parent
 * closely: a line item may come before its order, or anywhere after it. An order's items must all
 * be known before it is written (they are stored on its row), so the reader cannot emit an order
 * before the file ends, and holding every order until then is the whole file in memory. Instead it
 * reads the file twice, as a hash join would: the first pass streams the download's bytes into
 * partition files on local disk, each line going to the partition of its order (its own id, or
 * its `__parentId`), without decoding or parsing it; the second pass reads one partition at a
 * time, groups its lines by order as text and parses each order with its items only as it emits
 * it. An order and all its items land in one partition, so each partition is complete on its
 * own, and memory holds a few partitions: about 10,000 objects each whatever the file's size (the
 * operation's `objectCount`, and its `fileSize` when Shopify gives it, set the partition count).
 * The second pass runs in a worker (bulk_partition_worker.ts), two partitions ahead of the
 * caller, which receives each partition's records: parsing the bulk objects, larger than the
 * order lines they become, then overlaps the writes instead of adding to them.
 * Buffering orphans in memory until their parent arrives would be bounded only when children stay
 * near their parents, which ungrouped output does not promise. The disk holds the file once,
 * each partition deleted as it is read.
 *
 * @module
 */
import { type ImportRecord, streamLines } from "../commerce/import.ts";
import { gidType, mapBulkCustomer, mapBulkOrder } from "./bulk_mapping.ts";
import type { Payload } from "./order_mapping.ts";

/** How {@linkcode bulkOrderRecords} partitions. */
export interface BulkReadOptions {
  /** The operation's `objectCount` (every line), which sizes the partitions... */
  objectCount: number;
  /** ...with its `fileSize` when known, whichever asks for more partitions. */
  fileSize?: number | null;
  /** Objects per partition aimed at (default 10,000): what the second pass holds at once. */
  objectsPerPartition?: number;
  /** Where partition files go (default the system's temporary directory). */
  tempDir?: string;
  /** Told the running count of lines read from the download. */
  onRead?: (lines: number) => void;
  /** Told the line item count of each order read (before it is validated). */
  onItems?: (items: number) => void;
}

/** Partition files open at once at most (each holds a small write buffer). */
const _MAX_PARTITIONS = 1024;
/** Bytes per partition at most when the file's size is known (about 10,000 orders' lines). */
const _BYTES_PER_PARTITION = 8_000_000;
/** Bytes buffered for all partitions at most, before they are written... */
const _BUFFERED_BYTES = 16 * 1024 * 1024;
/** ...but never fewer than this per partition, nor more than that. */
const _MIN_FLUSH_BYTES = 16_384;
const _MAX_FLUSH_BYTES = 262_144;
const _PARENT = '"__parentId":"';
const _PARENT_BYTES = new TextEncoder().encode(_PARENT);
const _ID_BYTES = new TextEncoder().encode('{"id":"');

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
    Math.max(
      1,
      Math.ceil(options.objectCount / (options.objectsPerPartition ?? 10_000)),
      Math.ceil((options.fileSize ?? 0) / _BYTES_PER_PARTITION),
    ),
  );
  const dir = await Deno.makeTempDir({ dir: options.tempDir, prefix: "shop_sync_" });
  let worker: _PartitionWorker | undefined;
  try {
    // Started first: it loads while the first pass runs.
    worker = new _PartitionWorker();
    const written = await _partition(stream, dir, count, options.onRead);
    const paths = written.flatMap((file, p) => file ? [`${dir}/${p}`] : []);
    // The worker reads the next partitions while this one's records are written.
    const ahead: Promise<ImportRecord[]>[] = [];
    let next = 0;
    while (next < paths.length && ahead.length < _AHEAD) ahead.push(worker.group(paths[next++]!));
    while (ahead.length > 0) {
      const records = await ahead.shift()!;
      if (next < paths.length) ahead.push(worker.group(paths[next++]!));
      if (options.onItems) {
        for (const record of records) {
          if ("value" in record) {
            const items = (record.value as { line_items?: unknown[] }).line_items;
            options.onItems(items?.length ?? 0);
          }
        }
      }
      yield* records;
    }
  } finally {
    worker?.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Partitions asked of the worker ahead of the one being written. */
const _AHEAD = 2;

/** A message from bulk_partition_worker.ts: a partition's records, or why it has none. */
export type PartitionAnswer = { records: ImportRecord[] } | { error: string };

/**
 * The second pass's worker (bulk_partition_worker.ts): partition files in, their records out, in
 * the order asked.
 */
class _PartitionWorker {
  #worker = new Worker(new URL("./bulk_partition_worker.ts", import.meta.url).href, {
    type: "module",
  });
  #waiting: { resolve: (records: ImportRecord[]) => void; reject: (err: Error) => void }[] = [];

  constructor() {
    this.#worker.onmessage = (event: MessageEvent<PartitionAnswer>) => {
      const waiter = this.#waiting.shift();
      if ("error" in event.data) waiter?.reject(new Error(event.data.error));
      else waiter?.resolve(event.data.records);
    };
    this.#worker.onerror = (event) => {
      event.preventDefault();
      for (const waiter of this.#waiting.splice(0)) waiter.reject(new Error(event.message));
    };
  }

  /** The records of one partition file (deleted once read). */
  group(path: string): Promise<ImportRecord[]> {
    const answer = new Promise<ImportRecord[]>((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
    });
    // Awaited in turn; a failure before then is not an unhandled rejection.
    answer.catch(() => {});
    this.#worker.postMessage({ path });
    return answer;
  }

  close(): void {
    this.#worker.terminate();
    for (const waiter of this.#waiting.splice(0)) waiter.reject(new Error("worker closed"));
  }
}

/**
 * The records of one partition file, which it deletes once read (the second pass, run by
 * bulk_partition_worker.ts).
 */
export async function groupPartitionFile(path: string): Promise<ImportRecord[]> {
  const text = await Deno.readTextFile(path);
  await Deno.remove(path);
  return [..._groupPartition(text)];
}

interface _Partition {
  buffer: Uint8Array;
  length: number;
  file?: Deno.FsFile;
}

/**
 * First pass: each line, prefixed by its number and its order key (see `_partitionOf`), appended
 * to its order's partition file. It works on the downloaded bytes (no decoding, no parsing): it
 * is the one step the writes cannot overlap. Writes are synchronous: a buffer handed to the page
 * cache takes less than a round trip through the async file API, and this pass has nothing else
 * to do meanwhile.
 */
async function _partition(
  stream: ReadableStream<Uint8Array>,
  dir: string,
  count: number,
  onRead: ((lines: number) => void) | undefined,
): Promise<boolean[]> {
  // Fewer, larger writes; the buffers together stay bounded.
  const flushBytes = Math.min(
    _MAX_FLUSH_BYTES,
    Math.max(_MIN_FLUSH_BYTES, Math.floor(_BUFFERED_BYTES / count)),
  );
  const parts: _Partition[] = Array.from({ length: count }, () => ({
    buffer: new Uint8Array(0),
    length: 0,
  }));
  const flush = (p: number) => {
    const part = parts[p]!;
    part.file ??= Deno.openSync(`${dir}/${p}`, { write: true, create: true });
    for (let offset = 0; offset < part.length;) {
      offset += part.file.writeSync(part.buffer.subarray(offset, part.length));
    }
    part.length = 0;
  };
  let line = 0;
  /** Appends one line; returns its partition when that is due to be written. */
  const add = (bytes: Uint8Array): number | null => {
    line++;
    if (line % 10_000 === 0) onRead?.(line);
    let end = bytes.length;
    while (end > 0 && (bytes[end - 1] === 13 || bytes[end - 1] === 32)) end--;
    if (end === 0) return null;
    const text = bytes.subarray(0, end);
    const p = _partitionOf(text, count);
    const part = parts[p]!;
    const keyLength = _found.end - _found.start;
    const needed = part.length + text.length + keyLength + 16;
    if (needed > part.buffer.length) {
      const grown = new Uint8Array(Math.max(needed, flushBytes * 2, part.buffer.length * 2));
      grown.set(part.buffer.subarray(0, part.length));
      part.buffer = grown;
    }
    const buffer = part.buffer;
    const digits = String(line);
    for (let i = 0; i < digits.length; i++) buffer[part.length++] = digits.charCodeAt(i);
    buffer[part.length++] = 9;
    if (keyLength > 0) {
      buffer[part.length++] = _found.child ? 99 : 111;
      buffer.set(text.subarray(_found.start, _found.end), part.length);
      part.length += keyLength;
    }
    buffer[part.length++] = 9;
    buffer.set(text, part.length);
    part.length += text.length;
    buffer[part.length++] = 10;
    return part.length >= flushBytes ? p : null;
  };
  const written: boolean[] = new Array(count).fill(false);
  try {
    let carry: Uint8Array | null = null;
    for await (const chunk of stream) {
      let start = 0;
      let newline = chunk.indexOf(10);
      if (carry) {
        if (newline < 0) {
          carry = _concat(carry, chunk);
          continue;
        }
        const due = add(_concat(carry, chunk.subarray(0, newline)));
        carry = null;
        if (due !== null) flush(due);
        start = newline + 1;
        newline = chunk.indexOf(10, start);
      }
      while (newline >= 0) {
        const due = add(chunk.subarray(start, newline));
        if (due !== null) flush(due);
        start = newline + 1;
        newline = chunk.indexOf(10, start);
      }
      if (start < chunk.length) carry = chunk.slice(start);
    }
    if (carry) add(carry);
    onRead?.(line);
    for (let p = 0; p < count; p++) {
      if (parts[p]!.length > 0) flush(p);
      written[p] = parts[p]!.file !== undefined;
    }
  } finally {
    for (const part of parts) part.file?.close();
  }
  return written;
}

function _concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}

/**
 * The order key {@linkcode _partitionOf} read from a line's bytes: the digits at
 * `start`..`end` (empty when the line has another shape), and whether the line is a child.
 */
const _found = { start: 0, end: 0, child: false };

/**
 * The partition of a line: its order's number (its own id, or its `__parentId`) modulo the
 * partition count, read from the bytes (Shopify writes `__parentId` last and `id` first; a slash
 * may come escaped, digits never do). The number's last 20 digits, and whether the line is a
 * child, are left in `_found`, written beside the line so that the second pass need not look
 * again. Any other shape is parsed (and `_found` left empty).
 */
function _partitionOf(bytes: Uint8Array, count: number): number {
  let start = -1;
  let child = false;
  const tail = bytes.length - _PARENT_BYTES.length - 2;
  // `"__parentId":"gid:\/\/shopify\/Order\/<digits>"}`: at most ~60 bytes from the end.
  for (let i = tail; i >= 0 && i > tail - 80 && start < 0; i--) {
    if (bytes[i] === 34 && _startsWith(bytes, _PARENT_BYTES, i)) start = i + _PARENT_BYTES.length;
  }
  if (start >= 0) child = true;
  else if (_startsWith(bytes, _ID_BYTES, 0)) start = _ID_BYTES.length;
  _found.start = _found.end = 0;
  if (start >= 0) {
    const close = bytes.indexOf(34, start);
    let first = close;
    while (first > start && bytes[first - 1]! >= 48 && bytes[first - 1]! <= 57) first--;
    if (close > first) {
      _found.start = Math.max(first, close - 20);
      _found.end = close;
      _found.child = child;
      let value = 0;
      for (let i = first; i < close; i++) value = (value * 10 + bytes[i]! - 48) % count;
      return value;
    }
  }
  const key = _keyOf(new TextDecoder().decode(bytes));
  return key ? Number(BigInt(key.number) % BigInt(count)) : 0;
}

function _startsWith(bytes: Uint8Array, prefix: Uint8Array, at: number): boolean {
  if (at + prefix.length > bytes.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false;
  return true;
}

/**
 * A line's order (the number of its GID) and whether the line is a child of it, read without
 * parsing when the line has Shopify's shape; null for a line without an id.
 */
function _keyOf(json: string): { number: string; child: boolean } | null {
  const parent = json.lastIndexOf(_PARENT);
  let gid: string | undefined;
  let child = false;
  if (parent >= 0) {
    const start = parent + _PARENT.length;
    gid = json.slice(start, json.indexOf('"', start));
    child = true;
  } else if (json.startsWith('{"id":"')) {
    gid = json.slice(7, json.indexOf('"', 7));
  } else {
    try {
      const value = JSON.parse(json) as Payload;
      child = typeof value?.__parentId === "string";
      gid = String(child ? value.__parentId : value?.id);
    } catch {
      return null;
    }
  }
  const number = /(\d{1,20})$/.exec(gid)?.[1];
  return number ? { number, child } : null;
}

interface _Line {
  line: number;
  json: string;
}

/**
 * Second pass over one partition: its orders with their items, in the order of their lines.
 * Lines are grouped as text and each order is parsed only when it is emitted, so parsed objects
 * live briefly (a partition's worth of them would outlive the young generation).
 */
function* _groupPartition(text: string): Generator<ImportRecord> {
  const orders = new Map<string, _Line & { items: _Line[] }>();
  const orphans = new Map<string, _Line[]>();
  const bad: ImportRecord[] = [];
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    const tab = text.indexOf("\t", start);
    const keyTab = text.indexOf("\t", tab + 1);
    const entry = { line: Number(text.slice(start, tab)), json: text.slice(keyTab + 1, end) };
    start = end + 1;
    const key = keyTab > tab + 1
      ? { number: text.slice(tab + 2, keyTab), child: text.charCodeAt(tab + 1) === 99 }
      : _keyOf(entry.json);
    if (!key) {
      bad.push({ line: entry.line, errors: ["not a JSON object with a Shopify id"] });
      continue;
    }
    if (key.child) {
      const parent = orders.get(key.number);
      if (parent) parent.items.push(entry);
      else {
        const waiting = orphans.get(key.number);
        if (waiting) waiting.push(entry);
        else orphans.set(key.number, [entry]);
      }
      continue;
    }
    if (orders.has(key.number)) {
      bad.push({ line: entry.line, errors: [`order ${key.number} appears twice`] });
      continue;
    }
    // Children read before their parent go first: they came first in the file.
    const early = orphans.get(key.number);
    if (early) orphans.delete(key.number);
    orders.set(key.number, { ...entry, items: early ?? [] });
  }
  yield* bad;
  for (const [parent, items] of orphans) {
    for (const { line } of items) {
      yield { line, errors: [`line item of order ${parent}, which is not in the file`] };
    }
  }
  for (const entry of orders.values()) yield _orderRecord(entry);
}

/** One order and its items parsed and mapped; a line that does not parse is the order's error. */
function _orderRecord(entry: _Line & { items: _Line[] }): ImportRecord {
  const parse = (line: _Line): Payload | string => {
    try {
      const value = JSON.parse(line.json);
      return value !== null && typeof value === "object" && !Array.isArray(value)
        ? value
        : `line ${line.line}: not a JSON object`;
    } catch {
      return `line ${line.line}: not valid JSON`;
    }
  };
  const order = parse(entry);
  const items = entry.items.map(parse);
  const errors = [order, ...items].filter((value): value is string => typeof value === "string");
  if (typeof order !== "string" && gidType(order.id) !== "Order") {
    errors.push(`line ${entry.line}: not an order: ${String(order.id)}`);
  }
  if (errors.length > 0) return { line: entry.line, errors };
  return { line: entry.line, value: mapBulkOrder(order as Payload, items as Payload[]) };
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
