/**
 * The shape of an operator command: `parse` checks the arguments before any store is opened,
 * `run` does the work and returns the JSON the CLI prints.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { findBrandContext } from "../tenancy/brands.ts";
import type { Config } from "../config.ts";
import type { Stores } from "../store/stores.ts";

/** A bad command line: the CLI prints it with the usage and exits 2. */
export class UsageError extends Error {}

/** One operator command. */
export interface Command<T> {
  /** The synopsis line(s) shown by `help` (flags after the command's name). */
  usage: string;
  parse(args: string[]): T;
  run(stores: Stores, input: T, config: Config): Promise<unknown>;
}

/** The commands of one group, by name (`"brand create"`). */
// deno-lint-ignore no-explicit-any
export type Commands = Record<string, Command<any>>;

/** Types a command literal (the input type flows from `parse` to `run`). */
export function defineCommand<T>(command: Command<T>): Command<T> {
  return command;
}

/** `node:util` parseArgs in strict mode; its errors become usage errors. */
export function parseFlags(
  args: string[],
  options: Record<string, { type: "string" | "boolean" }>,
  allowPositionals = false,
) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/** Fails with "no brand ID" unless the brand exists. */
export async function requireBrand(stores: Stores, brandId: string): Promise<void> {
  if (!(await findBrandContext(stores.sql, brandId))) throw new Error(`no brand ${brandId}`);
}
