/**
 * The second pass of bulk_jsonl.ts in a worker of its own: asked for a partition file, it reads,
 * groups, parses and maps it ({@linkcode groupPartitionFile}) and answers with the partition's
 * records, in the order asked. The bulk objects are larger than the order lines they become:
 * parsing them here, while the thread that asked validates and writes the previous partition's
 * orders, keeps that thread from being the backfill's bottleneck.
 *
 * @module
 */
/// <reference lib="deno.worker" />
import { groupPartitionFile, type PartitionAnswer } from "./bulk_jsonl.ts";

self.onmessage = async (event: MessageEvent<{ path: string }>) => {
  let answer: PartitionAnswer;
  try {
    answer = { records: await groupPartitionFile(event.data.path) };
  } catch (err) {
    answer = { error: err instanceof Error ? err.message : String(err) };
  }
  self.postMessage(answer);
};
