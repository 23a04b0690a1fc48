/**
 * Operator commands of segments: importing Apache Unomi segment definitions into a brand
 * (docs/conditions.md#migrating-segments-from-unomi).
 *
 * @module
 */
import { importUnomiSegments } from "../engine/segment_import.ts";
import { findBrandContext } from "../tenancy/brands.ts";
import { type Commands, defineCommand, parseFlags, UsageError } from "./command.ts";

/** `segments import`. */
export const segmentCommands: Commands = {
  "segments import": defineCommand({
    usage: "--brand ID FILE        (Unomi segment JSON: one object or an array; - reads stdin)",
    parse(args) {
      const { values, positionals } = parseFlags(args, { brand: { type: "string" } }, true);
      if (values.brand === undefined) throw new UsageError("--brand is required");
      if (positionals.length !== 1) throw new UsageError("give one FILE (or - for stdin)");
      return { brandId: values.brand as string, file: positionals[0]! };
    },
    async run(stores, input) {
      const brand = await findBrandContext(stores.sql, input.brandId);
      if (!brand) throw new Error(`no brand ${input.brandId}`);
      if (!brand.scope) {
        throw new Error(`brand ${input.brandId} has no shop: segments need a scope`);
      }
      const text = input.file === "-"
        ? await new Response(Deno.stdin.readable).text()
        : await Deno.readTextFile(input.file);
      let definitions: unknown;
      try {
        definitions = JSON.parse(text);
      } catch (err) {
        throw new Error(`${input.file} is not JSON: ${err instanceof Error ? err.message : err}`);
      }
      const result = await importUnomiSegments(stores.sql, {
        scope: brand.scope,
        definitions,
        now: new Date(),
      });
      return { brand: input.brandId, ...result };
    },
  }),
};
