/**
 * Operator commands of segments: importing Apache Unomi segment definitions into a brand
 * (docs/conditions.md#migrating-segments-from-unomi).
 *
 * @module
 */
import { importUnomiSegments } from "../engine/segment_import.ts";
import { brandAndFile, type Commands, defineCommand, requireWritableBrand } from "./command.ts";

/** `segments import`. */
export const segmentCommands: Commands = {
  "segments import": defineCommand({
    usage: "--brand ID FILE        (Unomi segment JSON: one object or an array; - reads stdin)",
    summary: "Creates or updates a brand's segments from Apache Unomi segment definitions " +
      "(docs/conditions.md); the file's scope is replaced by the brand's.",
    parse: brandAndFile,
    input: (parsed) => parsed.file,
    async run(stores, input, _config, io) {
      const brand = await requireWritableBrand(stores, input.brandId);
      if (!brand.scope) {
        throw new Error(`brand ${input.brandId} has no shop: segments need a scope`);
      }
      const text = await new Response(await io.open(input.file)).text();
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
