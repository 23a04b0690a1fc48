import assert from "node:assert/strict";
import {
  customerHistories,
  dayText,
  epochDay,
  meanDayTotal,
  ordersBetween,
  parseDay,
  rfmRow,
  rfmSummary,
} from "../../../../lib/commerce/predictions/rfm_summary.ts";
import { CDNOW_CUT_OFF, cdnowOrders, cdnowPublishedSummary } from "./cdnow_fixture.ts";

Deno.test("days are UTC calendar days", () => {
  assert.equal(epochDay(new Date("1997-01-01T23:59:59Z")), parseDay("1997-01-01"));
  assert.equal(parseDay("19970101"), parseDay("1997-01-01"));
  assert.equal(dayText(parseDay("1997-09-30")), "1997-09-30");
  // T = 272 days for a first purchase on 1 January 1997 and the cut-off 1997-09-30.
  assert.equal(CDNOW_CUT_OFF - parseDay("1997-01-01"), 272);
});

Deno.test("orders of one day are one transaction, their totals summed", () => {
  const d = parseDay("2026-01-01");
  const [history] = customerHistories([
    { customer: "c", day: d, total: 10 },
    { customer: "c", day: d, total: 5 },
    { customer: "c", day: d + 10, total: 20 },
    { customer: "c", day: d + 10, total: 4 },
    { customer: "c", day: d + 30, total: 8 },
    { customer: "c", day: d + 50, total: 100 },
  ]);
  assert.deepEqual(history!.days, [d, d + 10, d + 30, d + 50]);
  assert.deepEqual(history!.totals, [15, 24, 8, 100]);
  // Orders after the cut-off day are left out.
  assert.deepEqual(rfmRow(history!, d + 40), {
    customer: "c",
    x: 2,
    t_x: 30,
    T: 40,
    spend: 16,
  });
  assert.equal(rfmRow(history!, d - 1), null);
  assert.equal(ordersBetween(history!, d + 10, d + 50), 2);
  // Her own average order value: the mean of the order days' totals, the first day included.
  assert.equal(meanDayTotal(history!), (15 + 24 + 8 + 100) / 4);
});

Deno.test("CDNOW: the summary from the transaction log is the published one", () => {
  const rows = rfmSummary(customerHistories(cdnowOrders()), CDNOW_CUT_OFF);
  const published = cdnowPublishedSummary();
  assert.equal(rows.length, published.length);
  const byId = new Map(rows.map((row) => [Number(row.customer), row]));
  for (const expected of published) {
    const row = byId.get(expected.id)!;
    // Counting the 223 same-day duplicate purchases apart breaks x and zbar here.
    assert.equal(row.x, expected.x, `x of ${expected.id}`);
    assert.ok(Math.abs(row.t_x / 7 - expected.t_x) < 0.006, `t_x of ${expected.id}`);
    assert.ok(Math.abs(row.T / 7 - expected.T) < 0.006, `T of ${expected.id}`);
    assert.ok(Math.abs(row.spend - expected.zbar) < 0.006, `zbar of ${expected.id}`);
  }
});
