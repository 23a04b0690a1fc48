/**
 * NDJSON imports: a stream of lines validated, prepared and written in batches, each kind of line
 * described by its {@linkcode ImportSteps}.
 *
 * @module
 */
import type { z } from "zod";
import type { Sql, Tx } from "../store/db.ts";

/** The outcome of an import. */
export interface ImportResult {
  imported: number;
  rejected: { line: number; errors: string[] }[];
  /** Present when more lines were rejected than are listed. */
  rejected_truncated?: true;
}

/**
 * How one kind of line is imported: validated by `schema`, what it needs resolved by `prepare`
 * (its customer's contact), then written by `write`.
 */
export interface ImportSteps<L, P> {
  schema: z.ZodType<L>;
  /** A cheaper check of the common shape: the parsed line, or undefined to let `schema` decide. */
  fastParse?: (raw: unknown) => L | undefined;
  /** Resolves one value per line, in file order, one batch at a time, each committed on its own. */
  prepare(tx: Tx, lines: L[]): Promise<P[]>;
  /** Called once the transaction of the last `prepare` has committed. */
  prepared?(): void;
  /** Writes a batch of valid lines with what `prepare` returned for them. */
  write(tx: Tx, lines: L[], prepared: P[]): Promise<unknown>;
  /** Lines with the same key (the external id) are written in file order. */
  keyOf(line: L): string;
}

/** How an import runs: its writers, its batch size, and whom it tells of its progress. */
export interface ImportOptions {
  writers?: number;
  batchLines?: number;
  /** Told the running count of lines written after each batch commits. */
  onWritten?: (imported: number) => void;
}

/** Rejections listed in full; past this the count goes on but the list stops growing. */
const _MAX_LISTED = 10_000;
/** Lines a transaction: large enough that round trips and commits are a small share. */
const _BATCH = 2_000;

interface _Line<T> {
  line: number;
  value: T;
}

/**
 * Imports NDJSON from a byte stream: one object a line, validated, prepared and written in
 * transactions of up to `batchLines` (default 2,000) lines. Reads line by line, so a file of any
 * size never sits in memory (at most `writers` + 2 batches). Batches are prepared one at a time in
 * file order, and written up to `writers` (default 2) at once, so that the database may use more
 * than one core; a batch sharing a key with an earlier one is written after it. A line that fails
 * validation, its preparation or its write is reported with its line number and errors; the other
 * lines of its batch still land (a failed batch is retried line by line). Blank lines are skipped.
 * Contacts a line prepared stay when its write fails. A stream that fails rejects, once every
 * batch already read has been written.
 */
export function importNdjson<L, P>(
  sql: Sql,
  stream: ReadableStream<Uint8Array>,
  steps: ImportSteps<L, P>,
  options: ImportOptions = {},
): Promise<ImportResult> {
  return importRecords(sql, ndjsonRecords(stream), steps, options);
}

/** One record of a source: its line number, and the value read or why it could not be read. */
export type ImportRecord = { line: number; value: unknown } | { line: number; errors: string[] };

/** The records of an NDJSON byte stream: one per non-blank line, numbered from 1. */
export async function* ndjsonRecords(
  stream: ReadableStream<Uint8Array>,
): AsyncGenerator<ImportRecord> {
  let line = 0;
  for await (const text of streamLines(stream)) {
    line++;
    if (text.trim() === "") continue;
    try {
      yield { line, value: JSON.parse(text) };
    } catch {
      yield { line, errors: ["not valid JSON"] };
    }
  }
}

/**
 * Imports records read by any source (NDJSON, a Shopify bulk operation's regrouped objects)
 * exactly as {@linkcode importNdjson} imports its lines: validated, prepared and written in
 * batches, each rejection reported with the record's line number.
 */
export async function importRecords<L, P>(
  sql: Sql,
  records: AsyncIterable<ImportRecord>,
  steps: ImportSteps<L, P>,
  options: ImportOptions = {},
): Promise<ImportResult> {
  const writers = options.writers ?? 2;
  const batchLines = options.batchLines ?? _BATCH;
  const result: ImportResult = { imported: 0, rejected: [] };
  // Rejections arrive out of line order (batches finish out of order), so the list keeps the
  // lowest line numbers: bounded, trimmed as it grows.
  let listed: { line: number; errors: string[] }[] = [];
  let cutoff = Infinity;
  const trim = () => {
    listed.sort((a, b) => a.line - b.line);
    if (listed.length > _MAX_LISTED) {
      listed = listed.slice(0, _MAX_LISTED);
      cutoff = listed[_MAX_LISTED - 1]!.line;
      result.rejected_truncated = true;
    }
  };
  const reject = (line: number, err: unknown) => {
    if (line > cutoff) {
      result.rejected_truncated = true;
      return;
    }
    listed.push({ line, errors: Array.isArray(err) ? err : [_message(err)] });
    if (listed.length >= 2 * _MAX_LISTED) trim();
  };
  const transaction = <T>(fn: (tx: Tx) => Promise<T>): Promise<T> =>
    sql.begin((tx) => fn(tx as unknown as Tx)) as Promise<T>;
  const prepare = async (batch: _Line<L>[]): Promise<[_Line<L>, P][]> => {
    try {
      const prepared = await transaction((tx) =>
        steps.prepare(tx, batch.map((item) => item.value))
      );
      steps.prepared?.();
      return batch.map((item, i) => [item, prepared[i] as P]);
    } catch {
      // Find the culprit(s): each line on its own.
      const ready: [_Line<L>, P][] = [];
      for (const item of batch) {
        try {
          const [value] = await transaction((tx) => steps.prepare(tx, [item.value]));
          steps.prepared?.();
          ready.push([item, value as P]);
        } catch (err) {
          reject(item.line, err);
        }
      }
      return ready;
    }
  };
  const write = async (ready: [_Line<L>, P][]) => {
    if (ready.length === 0) return;
    try {
      await transaction((tx) =>
        steps.write(tx, ready.map(([item]) => item.value), ready.map(([, value]) => value))
      );
      result.imported += ready.length;
      options.onWritten?.(result.imported);
    } catch {
      for (const [item, value] of ready) {
        try {
          await transaction((tx) => steps.write(tx, [item.value], [value]));
          result.imported++;
        } catch (err) {
          reject(item.line, err);
        }
      }
      options.onWritten?.(result.imported);
    }
  };
  // Batches between parse and written; each settles (never rejects) once written.
  const pending: { keys: Set<string>; done: Promise<void> }[] = [];
  const slots = _semaphore(writers);
  let preparing: Promise<unknown> = Promise.resolve();
  const submit = async (batch: _Line<L>[]) => {
    while (pending.length > writers) await Promise.race(pending.map((entry) => entry.done));
    const keys = new Set(batch.map((item) => steps.keyOf(item.value)));
    const earlier = pending.filter((entry) => _intersects(entry.keys, keys));
    const prepared = preparing.then(() => prepare(batch));
    preparing = prepared;
    const entry = {
      keys,
      done: (async () => {
        const ready = await prepared;
        await Promise.all(earlier.map((other) => other.done));
        await slots.run(() => write(ready));
      })(),
    };
    pending.push(entry);
    entry.done.finally(() => pending.splice(pending.indexOf(entry), 1));
  };
  let batch: _Line<L>[] = [];
  try {
    for await (const record of records) {
      const lineNumber = record.line;
      if ("errors" in record) {
        reject(lineNumber, record.errors);
        continue;
      }
      const raw = record.value;
      const fast = steps.fastParse?.(raw);
      const parsed = fast !== undefined
        ? { success: true as const, data: fast }
        : steps.schema.safeParse(raw);
      if (!parsed.success) {
        reject(
          lineNumber,
          parsed.error.issues.map((i) =>
            `${i.path.length ? i.path.join(".") : "line"}: ${i.message}`
          ),
        );
        continue;
      }
      batch.push({ line: lineNumber, value: parsed.data });
      if (batch.length >= batchLines) {
        await submit(batch);
        batch = [];
      }
    }
    if (batch.length > 0) await submit(batch);
  } finally {
    // A stream that fails mid-file leaves no write running behind the caller's back.
    await Promise.all(pending.map((entry) => entry.done));
  }
  trim();
  result.rejected = listed;
  return result;
}

function _message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function _intersects(a: Set<string>, b: Set<string>): boolean {
  for (const key of a) if (b.has(key)) return true;
  return false;
}

/** Runs at most `limit` tasks at once, the others in the order they asked. */
function _semaphore(limit: number) {
  let running = 0;
  const queue: (() => void)[] = [];
  return {
    async run<T>(task: () => Promise<T>): Promise<T> {
      if (running >= limit) await new Promise<void>((resolve) => queue.push(resolve));
      else running++;
      try {
        return await task();
      } finally {
        const next = queue.shift();
        if (next) next();
        else running--;
      }
    },
  };
}

/** Splits a byte stream into lines (\n or \r\n), holding one partial line at a time. */
export async function* streamLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let pending = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    pending += chunk;
    let newline: number;
    while ((newline = pending.indexOf("\n")) >= 0) {
      yield pending.slice(0, newline).replace(/\r$/, "");
      pending = pending.slice(newline + 1);
    }
  }
  if (pending !== "") yield pending.replace(/\r$/, "");
}
