/**
 * What order and subscription writes share: where a batch is written, its customers' contacts
 * resolved before its lines, the last line per external id, and the steps of an import.
 *
 * @module
 */
import type { z } from "zod";
import type { Tx } from "../store/db.ts";
import { contactMemory, upsertContacts } from "./contacts.ts";
import type { ImportSteps } from "./import.ts";
import type { CustomerLine } from "./order_lines.ts";

/** Where a batch of lines is written: the brand, the id source and the clock. */
export interface LineWriting {
  brandId: string;
  newId: () => string;
  now: Date;
  /**
   * Insert a batch's new orders with COPY (a PostgreSQL server; embedded PGlite's socket has no
   * COPY), which costs the server less per order than the statement.
   */
  copy?: boolean;
}

/** A line that names its customer. */
interface _WithCustomer {
  external_id: string;
  customer?: CustomerLine | null;
}

/** Writes lines whose contacts are resolved (`contactIds`, one per line); returns their ids. */
export type LineWriter<L> = (
  tx: Tx,
  input: LineWriting & { lines: L[]; contactIds: (string | null)[] },
) => Promise<string[]>;

/** The last line of each external id with its contact: a batch may name one line twice. */
export function lastPerExternalId<T extends { external_id: string }>(
  lines: T[],
  contactIds: (string | null)[],
): (T & { contactId: string | null })[] {
  return [
    ...new Map(
      lines.map((line, i) => [line.external_id, { ...line, contactId: contactIds[i] ?? null }]),
    ).values(),
  ];
}

/**
 * Upserts the lines' contacts ({@linkcode upsertContacts}), then writes the lines with `write`
 * in the same transaction. Returns each line's id.
 */
export async function upsertLines<L extends _WithCustomer>(
  tx: Tx,
  input: LineWriting & { lines: L[] },
  write: LineWriter<L>,
): Promise<string[]> {
  const contactIds = await upsertContacts(tx, {
    brandId: input.brandId,
    customers: input.lines.map((line) => line.customer),
    now: input.now,
  });
  return await write(tx, { ...input, contactIds });
}

/**
 * The steps of an import of lines: each batch's contacts first, committed in file order, then
 * its lines written by `write`, keyed by external id.
 */
export function lineImport<L extends _WithCustomer>(
  input: LineWriting,
  kind: {
    schema: z.ZodType<L>;
    fastParse?: (raw: unknown) => L | undefined;
    write: LineWriter<L>;
  },
): ImportSteps<L, string | null> {
  const contacts = contactMemory(input);
  const steps: ImportSteps<L, string | null> = {
    schema: kind.schema,
    prepare: contacts.resolve,
    prepared: contacts.commit,
    write: (tx, lines, contactIds) => kind.write(tx, { ...input, lines, contactIds }),
    keyOf: (line) => line.external_id,
  };
  if (kind.fastParse) steps.fastParse = kind.fastParse;
  return steps;
}
