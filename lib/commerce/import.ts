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
const _BATCH = 500;

/**
 * Imports NDJSON from a byte stream: one object a line, validated by `schema`, written by
 * `applyBatch` in transactions of up to 500 lines. Reads line by line, so a file of any size never
 * sits in memory. A line that fails validation or its write is reported with its line number
 * and errors; the other lines of its batch still land (a failed batch is retried line by line).
 * Blank lines are skipped.
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
  const reject = (line: number, errors: string[]) => {
    if (result.rejected.length < _MAX_LISTED) result.rejected.push({ line, errors });
    else result.rejected_truncated = true;
  };
  let batch: { line: number; value: z.infer<S> }[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const current = batch;
    batch = [];
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
    if (batch.length >= _BATCH) await flush();
  }
  await flush();
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
