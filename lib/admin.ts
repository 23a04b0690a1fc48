/**
 * The operator CLI (`deno task admin`): brands, keys, dead letters, imports, migrations
 * (docs/operations.md).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { monotonicFactory } from "ulid";
import { issueApiKey } from "./tenancy/api_keys.ts";
import { createBrand, findBrandContext, setBrand } from "./tenancy/brands.ts";
import { createEmbeddedEngine } from "./engine/embedded.ts";
import { getDeadLetter, listDeadLetters, replayDeadLetter } from "./ingest/queue.ts";
import { parseQueuedEvents } from "./ingest/edge.ts";
import { importNdjson } from "./commerce/import.ts";
import { orderImport } from "./commerce/orders.ts";
import { subscriptionImport } from "./commerce/subscriptions.ts";
import { summarizeUsage } from "./http/usage.ts";
import { type Config, loadConfig } from "./config.ts";
import { openStores, type Stores } from "./store/stores.ts";
import { openTokenCipher } from "./tenancy/token_cipher.ts";

const USAGE = `Usage: deno task admin <command>

  brand create --name NAME [--shop DOMAIN] [--access-token TOKEN] [--beta]
  brand set --brand ID [--beta on|off] [--integration connected|disconnected]
  key issue --brand ID [--name LABEL]
  orders import --brand ID FILE          (NDJSON; - reads stdin)
  subscriptions import --brand ID FILE
  usage --brand ID [--from YYYY-MM-DD] [--to YYYY-MM-DD]
  deadletter list [--brand ID]
  deadletter show --id ID                (the letter with its events, as JSON)
  deadletter replay (--id ID [--events FILE] | --all [--brand ID])
      --events replaces the letter's events with FILE's before replaying (- reads
      stdin): a JSON array of events, or an object with an events array such as
      deadletter show prints; each keeps its id, a letter event left out is dropped

Each success prints one JSON object on stdout and exits 0; a failure prints a
message on stderr and exits non-zero (2 for a usage error).`;

class _UsageError extends Error {}

/** A command: `parse` checks the arguments before any store is opened; `run` does the work. */
interface _Command<T> {
  parse(args: string[]): T;
  run(stores: Stores, input: T, config: Config): Promise<unknown>;
}

function _command<T>(command: _Command<T>): _Command<T> {
  return command;
}

// deno-lint-ignore no-explicit-any
const _COMMANDS: Record<string, _Command<any>> = {
  "brand create": _command({
    parse(args) {
      const { values } = _parse(args, {
        name: { type: "string" },
        shop: { type: "string" },
        "access-token": { type: "string" },
        beta: { type: "boolean" },
      });
      if (values.name === undefined) throw new _UsageError("--name is required");
      return {
        name: values.name as string,
        shop: values.shop as string | undefined,
        accessToken: values["access-token"] as string | undefined,
        beta: values.beta === true,
      };
    },
    async run(stores, input, config) {
      const cipher = await openTokenCipher(stores.kv, config.tokenEncryptionKey);
      const deps = { sql: stores.sql, newId: monotonicFactory(), now: () => new Date(), cipher };
      return await createBrand(deps, input);
    },
  }),
  "brand set": _command({
    parse(args) {
      const { values } = _parse(args, {
        brand: { type: "string" },
        beta: { type: "string" },
        integration: { type: "string" },
      });
      if (values.brand === undefined) throw new _UsageError("--brand is required");
      const beta = values.beta as string | undefined;
      if (beta !== undefined && beta !== "on" && beta !== "off") {
        throw new _UsageError("--beta takes on or off");
      }
      const integration = values.integration as "connected" | "disconnected" | undefined;
      if (
        integration !== undefined && integration !== "connected" && integration !== "disconnected"
      ) {
        throw new _UsageError("--integration takes connected or disconnected");
      }
      return {
        brandId: values.brand as string,
        beta: beta === undefined ? undefined : beta === "on",
        integration,
      };
    },
    async run(stores, input) {
      return await setBrand({ sql: stores.sql, kv: stores.kv, now: () => new Date() }, input);
    },
  }),
  "key issue": _command({
    parse(args) {
      const { values } = _parse(args, { brand: { type: "string" }, name: { type: "string" } });
      if (values.brand === undefined) throw new _UsageError("--brand is required");
      return { brandId: values.brand as string, name: (values.name as string | undefined) ?? null };
    },
    async run(stores, input) {
      if (!(await findBrandContext(stores.sql, input.brandId))) {
        throw new Error(`no brand ${input.brandId}`);
      }
      const deps = { kv: stores.kv, now: () => new Date(), newId: monotonicFactory() };
      const issued = await issueApiKey(deps, input);
      return { id: issued.id, key: issued.key, prefix: issued.prefix };
    },
  }),
  "orders import": _importCommand("orders"),
  "subscriptions import": _importCommand("subscriptions"),
  "usage": _command({
    parse(args) {
      const { values } = _parse(args, {
        brand: { type: "string" },
        from: { type: "string" },
        to: { type: "string" },
      });
      if (values.brand === undefined) throw new _UsageError("--brand is required");
      for (const flag of ["from", "to"] as const) {
        const day = values[flag] as string | undefined;
        if (day !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(day)) {
          throw new _UsageError(`--${flag} takes a day as YYYY-MM-DD`);
        }
      }
      return {
        brandId: values.brand as string,
        from: values.from as string | undefined,
        to: values.to as string | undefined,
      };
    },
    async run(stores, input) {
      if (!(await findBrandContext(stores.sql, input.brandId))) {
        throw new Error(`no brand ${input.brandId}`);
      }
      const rows = await summarizeUsage(stores.kv, input.brandId, input);
      return {
        brand: input.brandId,
        from: input.from ?? null,
        to: input.to ?? null,
        total: rows.reduce((sum, row) => sum + row.requests, 0),
        days: rows,
      };
    },
  }),
  "deadletter list": _command({
    parse(args) {
      const { values } = _parse(args, { brand: { type: "string" } });
      return { brandId: values.brand as string | undefined };
    },
    async run(stores, input) {
      const letters = await listDeadLetters(stores.kv, input.brandId);
      return {
        deadLetters: letters.map((letter) => ({
          id: letter.id,
          brand: letter.message.brandId,
          scope: letter.message.batch.scope,
          source: letter.message.batch.source,
          events: letter.message.batch.events.length,
          reason: letter.reason,
          failed_at: letter.failedAt,
        })),
      };
    },
  }),
  "deadletter show": _command({
    parse(args) {
      const { values } = _parse(args, { id: { type: "string" } });
      if (values.id === undefined) throw new _UsageError("--id is required");
      return { id: values.id as string };
    },
    async run(stores, input) {
      const found = await getDeadLetter(stores.kv, input.id);
      if (!found) throw new Error(`no dead letter ${input.id}`);
      const { letter } = found;
      return {
        id: letter.id,
        brand: letter.message.brandId,
        scope: letter.message.batch.scope,
        source: letter.message.batch.source,
        reason: letter.reason,
        failed_at: letter.failedAt,
        events: letter.message.batch.events,
      };
    },
  }),
  "deadletter replay": _command({
    parse(args) {
      const { values } = _parse(args, {
        id: { type: "string" },
        all: { type: "boolean" },
        brand: { type: "string" },
        events: { type: "string" },
      });
      if ((values.id === undefined) === (values.all !== true)) {
        throw new _UsageError("give exactly one of --id ID or --all");
      }
      if (values.events !== undefined && values.id === undefined) {
        throw new _UsageError("--events needs --id");
      }
      return {
        id: values.id as string | undefined,
        brandId: values.brand as string | undefined,
        events: values.events as string | undefined,
      };
    },
    async run(stores, input) {
      const now = () => new Date();
      const deps = { kv: stores.kv, engine: createEmbeddedEngine({ sql: stores.sql, now }), now };
      // Read and checked before anything is applied: a bad file changes nothing.
      const events = input.events === undefined ? undefined : parseQueuedEvents(
        input.events === "-"
          ? await new Response(Deno.stdin.readable).text()
          : await Deno.readTextFile(input.events),
      );
      const ids = input.id !== undefined
        ? [input.id]
        : (await listDeadLetters(stores.kv, input.brandId)).map((letter) => letter.id);
      const replayed = [];
      for (const id of ids) {
        const outcome = await replayDeadLetter(deps, id, { events });
        if (!outcome && input.id !== undefined) throw new Error(`no dead letter ${id}`);
        if (outcome) replayed.push(outcome);
      }
      return { replayed };
    },
  }),
};

/** Runs one operator command against the stores `env` names; returns the process exit code. */
export async function runAdmin(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  const name = argv.slice(0, 2).join(" ");
  const single = _COMMANDS[argv[0] ?? ""];
  const command = _COMMANDS[name] ?? single;
  const args = _COMMANDS[name] ? argv.slice(2) : argv.slice(1);
  if (!command) {
    if (argv.length === 0 || argv[0] === "help" || argv[0] === "--help") {
      console.log(USAGE);
      return 0;
    }
    console.error(`error: unknown command: ${argv.join(" ")}\n\n${USAGE}`);
    return 2;
  }
  let stores: Stores | undefined;
  try {
    const input = command.parse(args);
    const config = loadConfig(env);
    stores = await openStores(config, { serve: false });
    console.log(JSON.stringify(await command.run(stores, input, config)));
    return 0;
  } catch (err) {
    console.error(`error: ${err instanceof Error ? err.message : String(err)}`);
    return err instanceof _UsageError ? 2 : 1;
  } finally {
    await stores?.close();
  }
}

/** `orders import` / `subscriptions import --brand ID FILE` (docs/commerce.md). */
function _importCommand(kind: "orders" | "subscriptions") {
  return _command({
    parse(args) {
      const { values, positionals } = _parse(args, { brand: { type: "string" } }, true);
      if (values.brand === undefined) throw new _UsageError("--brand is required");
      if (positionals.length !== 1) throw new _UsageError("give one FILE (or - for stdin)");
      return { brandId: values.brand as string, file: positionals[0]! };
    },
    async run(stores, input) {
      if (!(await findBrandContext(stores.sql, input.brandId))) {
        throw new Error(`no brand ${input.brandId}`);
      }
      const stream = input.file === "-"
        ? Deno.stdin.readable
        : (await Deno.open(input.file)).readable;
      const steps = {
        brandId: input.brandId,
        newId: monotonicFactory(),
        now: new Date(),
        copy: stores.database.mode === "postgres",
      };
      return kind === "orders"
        ? await importNdjson(stores.sql, stream, orderImport(steps))
        : await importNdjson(stores.sql, stream, subscriptionImport(steps));
    },
  });
}

function _parse(
  args: string[],
  options: Record<string, { type: "string" | "boolean" }>,
  allowPositionals = false,
) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals });
  } catch (err) {
    throw new _UsageError(err instanceof Error ? err.message : String(err));
  }
}
