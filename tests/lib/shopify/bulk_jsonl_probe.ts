/**
 * Run by bulk_jsonl_test.ts in a process of its own (`--expose-gc`, a small heap limit): reads a
 * generated orders file of `Deno.args[0]` orders through bulkOrderRecords and prints
 * `{orders, items, fileBytes, peakHeapBytes}`, the heap measured after a collection, so that
 * garbage not yet collected does not count.
 */
import { bulkOrderRecords } from "../../../lib/shopify/bulk_jsonl.ts";
import { generatedOrders } from "./fake_bulk_api.ts";

const gc = (globalThis as { gc?: () => void }).gc!;
const count = Number(Deno.args[0]);
let fileBytes = 0;
const source = generatedOrders(count, { childrenFirst: true }).pipeThrough(
  new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      fileBytes += chunk.byteLength;
      controller.enqueue(chunk);
    },
  }),
);
const measure = () => {
  gc();
  peak = Math.max(peak, Deno.memoryUsage().heapUsed - base);
};
gc();
const base = Deno.memoryUsage().heapUsed;
let peak = 0;
let orders = 0;
let items = 0;
for await (
  const record of bulkOrderRecords(source, {
    objectCount: count * 3,
    objectsPerPartition: 5_000,
    onRead: (lines) => lines % 50_000 === 0 && measure(),
  })
) {
  if (!("value" in record)) throw new Error(`rejected: ${JSON.stringify(record)}`);
  items += (record.value as { line_items: unknown[] }).line_items.length;
  if (++orders % 5_000 === 0) measure();
}
console.log(JSON.stringify({ orders, items, fileBytes, peakHeapBytes: peak }));
