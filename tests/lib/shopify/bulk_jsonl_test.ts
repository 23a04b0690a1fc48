import assert from "node:assert/strict";
import type { ImportRecord } from "../../../lib/commerce/import.ts";
import { bulkCustomerRecords, bulkOrderRecords } from "../../../lib/shopify/bulk_jsonl.ts";
import { bulkCustomer, bulkLineItem, bulkOrder, generatedOrders, jsonl } from "./fake_bulk_api.ts";

function streamOf(text: string): ReadableStream<Uint8Array> {
  return new Blob([text]).stream();
}

async function collect(records: AsyncIterable<ImportRecord>): Promise<ImportRecord[]> {
  const all: ImportRecord[] = [];
  for await (const record of records) all.push(record);
  return all;
}

type _Order = { external_id: string; line_items: { title: string; price: string }[] };

function orders(records: ImportRecord[]): Map<string, _Order> {
  return new Map(
    records.flatMap((r) =>
      "value" in r ? [[(r.value as _Order).external_id, r.value as _Order]] : []
    ),
  );
}

Deno.test("bulkOrderRecords: children before and after their order, across partitions", async () => {
  const text = [
    jsonl(bulkLineItem(2, 0)), // before its order
    jsonl(bulkOrder(1)),
    jsonl(bulkLineItem(1, 0)),
    jsonl(bulkOrder(2)),
    jsonl(bulkOrder(3)), // no items at all
    jsonl(bulkLineItem(2, 1)), // after another order
    "\n",
    jsonl(bulkLineItem(1, 1)),
    jsonl(bulkLineItem(9, 0)), // its order is not in the file
    "{not json\n",
  ].join("");
  for (const objectsPerPartition of [1, 1000]) {
    const records = await collect(
      bulkOrderRecords(streamOf(text), { objectCount: 10, objectsPerPartition }),
    );
    const byId = orders(records);
    assert.deepEqual([...byId.keys()].sort(), ["1", "2", "3"]);
    assert.deepEqual(byId.get("1")!.line_items.map((i) => i.title), ["Tee 0", "Tee 1"]);
    assert.deepEqual(byId.get("2")!.line_items.map((i) => i.title), ["Tee 0", "Tee 1"]);
    assert.deepEqual(byId.get("3")!.line_items, []);
    // Each order is numbered by its own line.
    const lineOf = (id: string) =>
      records.find((r) => "value" in r && (r.value as _Order).external_id === id)!.line;
    assert.deepEqual([lineOf("1"), lineOf("2"), lineOf("3")], [2, 4, 5]);
    const errors = records.filter((r) => "errors" in r).sort((a, b) => a.line - b.line);
    assert.deepEqual(errors, [
      { line: 9, errors: ["line item of order 9, which is not in the file"] },
      { line: 10, errors: ["not a JSON object with a Shopify id"] },
    ]);
  }
});

Deno.test("bulkOrderRecords: an item far behind its order still joins it; temp files are removed", async () => {
  const tempDir = await Deno.makeTempDir();
  try {
    const records = await collect(bulkOrderRecords(generatedOrders(3000, { lag: 2500 }), {
      objectCount: 9000,
      objectsPerPartition: 500,
      tempDir,
    }));
    const byId = orders(records);
    assert.equal(byId.size, 3000);
    assert.equal(records.length, 3000);
    for (const order of byId.values()) assert.equal(order.line_items.length, 2);
    assert.deepEqual([...Deno.readDirSync(tempDir)], []);
  } finally {
    await Deno.remove(tempDir, { recursive: true });
  }
});

Deno.test("bulkOrderRecords: a large file streams through with flat memory", async () => {
  // About 280 MB of JSONL, generated as it is read, in a process whose heap may not exceed 96 MB:
  // holding the file (or its orders) would not fit. The heap is measured after collections.
  const count = 200_000;
  const output = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--v8-flags=--expose-gc,--max-old-space-size=96",
      new URL("./bulk_jsonl_probe.ts", import.meta.url).pathname,
      String(count),
    ],
  }).output();
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 0, stderr);
  const probe = JSON.parse(new TextDecoder().decode(output.stdout));
  assert.equal(probe.orders, count);
  assert.equal(probe.items, 2 * count);
  assert.ok(probe.fileBytes > 250_000_000, `file of ${probe.fileBytes} bytes`);
  // Loose: one partition and its orders, whatever the file's size.
  assert.ok(probe.peakHeapBytes < 48_000_000, `heap grew by ${probe.peakHeapBytes} bytes`);
});

Deno.test("bulkCustomerRecords: each customer with its updatedAt; a line without an id is an error", async () => {
  const text = jsonl(bulkCustomer(7)) + jsonl({ id: "gid://shopify/Customer/x" }) + "oops\n";
  const records = await collect(bulkCustomerRecords(streamOf(text)));
  assert.deepEqual(records, [
    {
      line: 1,
      value: {
        customer: {
          shopify_customer_id: "7",
          email: "C7@Example.com",
          phone: null,
          first_name: "Cee",
          last_name: "7",
        },
        updatedAt: "2025-01-01T00:00:00Z",
      },
    },
    { line: 2, errors: ["not a customer with an id"] },
    { line: 3, errors: ["not valid JSON"] },
  ]);
});
