/**
 * A small synthetic brand for the prediction tests: customers who buy at their own pace and stop
 * at some point, generated deterministically, written as completed orders.
 *
 * @module
 */
import { monotonicFactory } from "ulid";
import { OrderLineSchema } from "../../../../lib/commerce/order_lines.ts";
import { upsertOrder } from "../../../../lib/commerce/orders.ts";
import type { Sql } from "../../../../lib/store/db.ts";

const DAY = 86_400_000;

/** Order lines of `customers` customers over the `days` days before `end` (a pseudo-random mix). */
export function syntheticOrders(customers: number, days: number, end: Date) {
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const start = end.getTime() - days * DAY;
  const lines: Record<string, unknown>[] = [];
  let n = 0;
  for (let c = 0; c < customers; c++) {
    let t = start + Math.floor(random() * days * 0.8) * DAY + 3_600_000 * (c % 20);
    const gap = 10 + random() * 60;
    const stop = random() * 0.5;
    while (t < end.getTime()) {
      n++;
      lines.push({
        external_id: String(n),
        number: `#${n}`,
        state: "complete",
        billing_status: "complete",
        total: (20 + random() * 80).toFixed(2),
        currency_code: "USD",
        created_at: new Date(t).toISOString(),
        customer: { email: `c${c}@example.com` },
      });
      if (random() < stop) break;
      t += Math.max(1, Math.round(gap * -Math.log(1 - random()))) * DAY;
    }
  }
  return lines;
}

/** One order line of a customer (by email), complete unless `state` says otherwise. */
export const orderLine = (
  id: string,
  email: string,
  at: string,
  total: string,
  state = "complete",
) => ({
  external_id: id,
  number: `#${id}`,
  state,
  billing_status: state === "complete" ? "complete" : "billable",
  total,
  currency_code: "USD",
  created_at: at,
  customer: { email },
});

/** Writes order lines as the brand's orders. */
export async function loadOrders(sql: Sql, brandId: string, lines: Record<string, unknown>[]) {
  const newId = monotonicFactory();
  await sql.begin(async (tx) => {
    for (const raw of lines) {
      await upsertOrder(tx as never, {
        brandId,
        line: OrderLineSchema.parse(raw),
        newId,
        now: new Date(),
      });
    }
  });
}
