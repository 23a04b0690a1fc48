/**
 * Operator commands for the ingest dead letters: list, show, replay (docs/operations.md).
 *
 * @module
 */
import { createEmbeddedEngine } from "../engine/embedded.ts";
import { parseQueuedEvents } from "../ingest/edge.ts";
import { getDeadLetter, listDeadLetters, replayDeadLetter } from "../ingest/queue.ts";
import { DomainError } from "../errors.ts";
import {
  brandIdArg,
  type Commands,
  defineCommand,
  letterIdArg,
  parseFlags,
  requiredFlag,
  UsageError,
} from "./command.ts";

/** `deadletter list`, `deadletter show`, `deadletter replay`. */
export const deadLetterCommands: Commands = {
  "deadletter list": defineCommand({
    usage: `[--brand ID]`,
    summary: "Lists the queued batches the forwarder gave up on, of every brand or one.",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" } });
      return {
        brandId: values.brand === undefined ? undefined : brandIdArg(values.brand as string),
      };
    },
    async run(stores, input) {
      const letters = await listDeadLetters(stores.queue.kv, input.brandId);
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

  "deadletter show": defineCommand({
    usage: `--id ID`,
    summary: "Prints a dead letter with its events, as JSON to fix and give back to replay.",
    parse(args) {
      const { values } = parseFlags(args, { id: { type: "string" } });
      return { id: letterIdArg(requiredFlag(values, "id")) };
    },
    async run(stores, input) {
      const found = await getDeadLetter(stores.queue.kv, input.id);
      if (!found) throw new DomainError("not_found", `no dead letter ${input.id}`);
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

  "deadletter replay": defineCommand({
    usage: `(--id ID [--events FILE] | --all [--brand ID])
    --events replaces the letter's events with FILE's before replaying (- reads
    stdin): a JSON array of events, or an object with an events array such as
    deadletter show prints; each keeps its id, a letter event left out is dropped`,
    summary: "Re-applies dead letters through the engine; a letter is deleted only when all " +
      "of it applied.",
    parse(args) {
      const { values } = parseFlags(args, {
        id: { type: "string" },
        all: { type: "boolean" },
        brand: { type: "string" },
        events: { type: "string" },
      });
      if ((values.id === undefined) === (values.all !== true)) {
        throw new UsageError("give exactly one of --id ID or --all");
      }
      if (values.events !== undefined && values.id === undefined) {
        throw new UsageError("--events needs --id");
      }
      return {
        id: values.id === undefined ? undefined : letterIdArg(values.id as string),
        brandId: values.brand === undefined ? undefined : brandIdArg(values.brand as string),
        events: values.events as string | undefined,
      };
    },
    input: (parsed) => parsed.events,
    async run(stores, input, _config, io) {
      const now = () => new Date();
      const deps = {
        kv: stores.queue.kv,
        engine: createEmbeddedEngine({ sql: stores.sql, now }),
        now,
      };
      // Read and checked before anything is applied: a bad file changes nothing.
      const events = input.events === undefined
        ? undefined
        : parseQueuedEvents(await new Response(await io.open(input.events)).text());
      const ids = input.id !== undefined
        ? [input.id]
        : (await listDeadLetters(stores.queue.kv, input.brandId)).map((letter) => letter.id);
      const replayed = [];
      for (const id of ids) {
        const outcome = await replayDeadLetter(deps, id, { events });
        if (!outcome && input.id !== undefined) {
          throw new DomainError("not_found", `no dead letter ${id}`);
        }
        if (outcome) replayed.push(outcome);
      }
      return { replayed };
    },
  }),
};
