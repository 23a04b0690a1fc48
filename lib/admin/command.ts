/**
 * The shape of an operator command: `parse` checks the arguments before any store is opened,
 * `run` does the work and returns the JSON the CLI prints. The same command runs in the CLI
 * process (cli.ts) or in the service behind `/admin` (routes/admin.ts); a file it reads comes
 * through `io.open`, so either side can supply it. Also the argument checks commands share.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { DomainError } from "../errors.ts";
import { assertBrandWritable, type BrandContext, findBrandContext } from "../tenancy/brands.ts";
import type { Config } from "../config.ts";
import type { Database } from "../store/db.ts";
import type { Stores } from "../store/stores.ts";
import type { IngestQueue } from "../ingest/queue.ts";
import type { TokenCipher } from "../tenancy/token_cipher.ts";

/** A bad command line: the CLI prints it with the usage and exits 2. */
export class UsageError extends Error {}

/** The stores a command works on: the CLI's own (its runtime's), or the running service's. */
export type CommandStores = Pick<Stores, "kv" | "sql"> & {
  database: Pick<Database, "mode">;
  /** The ingest queue (a command's job, `shop sync --background`, is sent on it). */
  queue: IngestQueue;
  /** The runtime's cipher of secrets at rest (`brand create` seals a token, `shop sync` opens it). */
  cipher: TokenCipher;
};

/** How a command reaches its file input, wherever it runs. */
export interface CommandIo {
  /**
   * The bytes of the command's FILE (the path its `input` names; `-` is stdin). In the CLI it is
   * the file; behind `/admin` it is the request body the remote CLI streamed.
   */
  open(path: string): Promise<ReadableStream<Uint8Array>>;
}

/** One operator command. */
export interface Command<T> {
  /** The synopsis (flags after the command's name), shown by `help` and `--help`. */
  usage: string;
  /** One sentence: what the command does, shown by `--help`. */
  summary: string;
  /**
   * The FILE the parsed command reads through `io.open` (undefined: none this time). The remote
   * CLI streams that file as the request body; a command reading files any other way cannot run
   * remotely.
   */
  input?(parsed: T): string | undefined;
  /** Opens the stores without applying migrations first (the `migrate` command). */
  beforeMigrations?: boolean;
  parse(args: string[]): T;
  run(stores: CommandStores, input: T, config: Config, io: CommandIo): Promise<unknown>;
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
  options: Record<string, { type: "string" | "boolean"; multiple?: boolean }>,
  allowPositionals = false,
) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/** A flag's value, or a usage error naming the flag when it is missing. */
export function requiredFlag(values: Record<string, unknown>, flag: string): string {
  const value = values[flag];
  if (typeof value !== "string") throw new UsageError(`--${flag} is required`);
  return value;
}

// Ids the service generates are ULIDs (Crockford base32, upper case), keys prefixed `key_`.
const _ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const _KEY_ID = /^key_[0-9A-HJKMNP-TV-Z]{26}$/;

/** Checks the shape of a brand id (as `brand create` prints it); a usage error otherwise. */
export function brandIdArg(value: string, flag = "brand"): string {
  if (!_ULID.test(value)) {
    throw new UsageError(
      `--${flag} takes a brand id: 26 characters of 0-9 and A-Z, as brand create prints (got ${
        JSON.stringify(value)
      })`,
    );
  }
  return value;
}

/** The arguments of a command that reads one FILE for one brand: `--brand ID FILE`. */
export function brandAndFile(args: string[]): { brandId: string; file: string } {
  const { values, positionals } = parseFlags(args, { brand: { type: "string" } }, true);
  const brandId = brandIdArg(requiredFlag(values, "brand"));
  if (positionals.length !== 1) throw new UsageError("give one FILE (or - for stdin)");
  return { brandId, file: positionals[0]! };
}

/** Checks the shape of an API key id (`key_` and 26 characters); a usage error otherwise. */
export function keyIdArg(value: string, flag = "id"): string {
  if (!_KEY_ID.test(value)) {
    throw new UsageError(
      `--${flag} takes a key id: key_ and 26 characters of 0-9 and A-Z, as key issue prints (got ${
        JSON.stringify(value)
      })`,
    );
  }
  return value;
}

/** Checks the shape of a dead letter id (a ULID); a usage error otherwise. */
export function letterIdArg(value: string, flag = "id"): string {
  if (!_ULID.test(value)) {
    throw new UsageError(
      `--${flag} takes a dead letter id: 26 characters of 0-9 and A-Z, as deadletter list prints (got ${
        JSON.stringify(value)
      })`,
    );
  }
  return value;
}

/** `--limit N`: a whole number from 1 to 1000, `fallback` when absent. */
export function limitArg(value: unknown, fallback: number): number {
  const limit = value === undefined ? fallback : Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new UsageError("--limit takes a whole number from 1 to 1000");
  }
  return limit;
}

/** Checks a calendar day `YYYY-MM-DD` that exists (no month 13, no 30 February). */
export function dayArg(value: string, flag: string): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  const [year, month, day] = match ? match.slice(1).map(Number) : [];
  const date = match ? new Date(Date.UTC(year!, month! - 1, day!)) : null;
  if (
    !date || date.getUTCFullYear() !== year || date.getUTCMonth() !== month! - 1 ||
    date.getUTCDate() !== day
  ) {
    throw new UsageError(
      `--${flag} takes a calendar day as YYYY-MM-DD (got ${JSON.stringify(value)})`,
    );
  }
  return value;
}

/** Fails with "no brand ID" (not found) unless the brand exists. */
export async function requireBrand(
  stores: Pick<CommandStores, "sql">,
  brandId: string,
): Promise<void> {
  if (!(await findBrandContext(stores.sql, brandId))) {
    throw new DomainError("not_found", `no brand ${brandId}`);
  }
}

/**
 * The brand, for a command that writes its data: not found unless it exists, forbidden while
 * shop/redact has erased its shop and no operator has reconnected it.
 */
export async function requireWritableBrand(
  stores: Pick<CommandStores, "sql">,
  brandId: string,
): Promise<BrandContext> {
  const brand = await findBrandContext(stores.sql, brandId);
  if (!brand) throw new DomainError("not_found", `no brand ${brandId}`);
  assertBrandWritable(brand);
  return brand;
}

/** A command's name in a URL: its words joined by `-` (`brand create` is `brand-create`). */
export function commandSlug(name: string): string {
  return name.replaceAll(" ", "-");
}
