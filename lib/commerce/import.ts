import type { z } from "zod";
import type { Sql, Tx } from "../db.ts";

/** The outcome of an import (design.md section 5). */
export interface ImportResult {
  imported: number;
  rejected: { line: number; errors: string[] }[];
  /** Present when more lines were rejected than are listed. */
  rejected_truncated?: true;
}

/** Rejections listed in full; past this the count goes on but the list stops growing. */
const _MAX_LISTED = 10_000;
/** Lines a transaction: large enough that round trips and commits are a small share. */
const _BATCH = 2_000;

/**
 * Imports NDJSON from a byte stream: one object a line, validated by `schema`, written by
 * `applyBatch` in transactions of up to 2,000 lines. Reads line by line, so a file of any size
 * never sits in memory (two batches at most: one being written while the next is parsed). Batches
 * are written one at a time, in file order. A line that fails validation or its write is reported
 * with its line number and errors; the other lines of its batch still land (a failed batch is
 * retried line by line). Blank lines are skipped.
 */
export async function importNdjson<S extends z.ZodType>(
  sql: Sql,
  input: {
    stream: ReadableStream<Uint8Array>;
    schema: S;
    /** Writes a batch of valid lines in the given transaction. */
    applyBatch: (tx: Tx, lines: z.infer<S>[]) => Promise<unknown>;
  },
): Promise<ImportResult> {
  const result: ImportResult = { imported: 0, rejected: [] };
  // Rejections arrive slightly out of line order (a batch's write errors after the next batch's
  // parse errors), so the list keeps the lowest line numbers: bounded, trimmed as it grows.
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
  const reject = (line: number, errors: string[]) => {
    if (line > cutoff) {
      result.rejected_truncated = true;
      return;
    }
    listed.push({ line, errors });
    if (listed.length >= 2 * _MAX_LISTED) trim();
  };
  const write = async (current: { line: number; value: z.infer<S> }[]) => {
    try {
      await sql.begin(async (tx) => {
        await input.applyBatch(tx as unknown as Tx, current.map((item) => item.value));
      });
      result.imported += current.length;
    } catch {
      // Find the culprit(s): each line on its own.
      for (const item of current) {
        try {
          await sql.begin(async (tx) => await input.applyBatch(tx as unknown as Tx, [item.value]));
          result.imported++;
        } catch (err) {
          reject(item.line, [err instanceof Error ? err.message : String(err)]);
        }
      }
    }
  };
  // The previous batch is written while the next one is parsed and validated.
  let writing: Promise<void> = Promise.resolve();
  const flush = async (current: { line: number; value: z.infer<S> }[]) => {
    await writing;
    if (current.length === 0) return;
    writing = write(current);
    writing.catch(() => {}); // awaited by the next flush; not an unhandled rejection meanwhile
  };
  let batch: { line: number; value: z.infer<S> }[] = [];
  let lineNumber = 0;
  for await (const text of _lines(input.stream)) {
    lineNumber++;
    if (text.trim() === "") continue;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      reject(lineNumber, ["not valid JSON"]);
      continue;
    }
    const parsed = input.schema.safeParse(raw);
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
    if (batch.length >= _BATCH) {
      await flush(batch);
      batch = [];
    }
  }
  await flush(batch);
  await writing;
  trim();
  result.rejected = listed;
  return result;
}

/** Splits a byte stream into lines (\n or \r\n), holding one partial line at a time. */
async function* _lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
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
