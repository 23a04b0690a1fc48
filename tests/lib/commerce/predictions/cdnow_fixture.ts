/**
 * The CDNOW sample (tests/fixtures/cdnow/, from the MIT-licensed `lifetimes` project) as order
 * rows, and its published per-customer summary, for the model tests.
 *
 * @module
 */
import { type OrderRow, parseDay } from "../../../../lib/commerce/predictions/rfm_summary.ts";

const _DIR = new URL("../../../fixtures/cdnow/", import.meta.url);

/** The calibration period's end in the published fits: 1997-09-30. */
export const CDNOW_CUT_OFF = parseDay("1997-09-30");

/** Every purchase of the sample: customer (sample id), day and dollar value. */
export function cdnowOrders(): OrderRow[] {
  const text = Deno.readTextFileSync(new URL("CDNOW_sample.txt", _DIR));
  return text.trim().split("\n").map((line) => {
    const [, customer, date, , value] = line.trim().split(/\s+/);
    return { customer: customer!, day: parseDay(date!), total: Number(value) };
  });
}

/** The published summary: per customer x, t_x and T in weeks, and zbar. */
export function cdnowPublishedSummary() {
  const text = Deno.readTextFileSync(
    new URL("cdnow_customers_summary_with_transactions.csv", _DIR),
  );
  return text.trim().split("\n").slice(1).map((line) => {
    const [id, x, t_x, T, zbar] = line.split(",").map(Number);
    return { id: id!, x: x!, t_x: t_x!, T: T!, zbar: zbar! };
  });
}

/** Asserts `actual` is within 1% of `expected`. */
export function assertWithin1Percent(actual: number, expected: number, what: string) {
  if (Math.abs(actual - expected) > 0.01 * Math.abs(expected)) {
    throw new Error(`${what}: ${actual} is not within 1% of ${expected}`);
  }
}
