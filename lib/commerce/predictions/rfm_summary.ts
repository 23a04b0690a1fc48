/**
 * The per-customer summary the purchase and spend models are fitted on, from order rows: order
 * dates are calendar days (UTC) and every order of one day is one transaction (its totals
 * summed), since the models count purchase occasions and a split basket is one occasion.
 *
 * @module
 */

/** Milliseconds in a day. */
const _DAY_MS = 86_400_000;

/** An order as the models read it: its customer, its UTC calendar day and its total. */
export interface OrderRow {
  customer: string;
  /** Days since 1970-01-01 (UTC), see {@linkcode epochDay}. */
  day: number;
  total: number;
}

/** One customer's distinct order days, ascending, and the summed total of each day. */
export interface CustomerHistory {
  customer: string;
  days: number[];
  totals: number[];
}

/**
 * One customer as of a cut-off day: `x` repeat order days (distinct days after the first),
 * `t_x` days from the first to the last order day, `T` days from the first order day to the
 * cut-off day, and `spend` the mean total of the repeat order days (0 when `x` is 0).
 */
export interface RfmRow {
  customer: string;
  x: number;
  t_x: number;
  T: number;
  spend: number;
}

/** The UTC calendar day of a date, as days since 1970-01-01. */
export function epochDay(date: Date): number {
  return Math.floor(date.getTime() / _DAY_MS);
}

/** The `YYYY-MM-DD` text of an epoch day. */
export function dayText(day: number): string {
  return new Date(day * _DAY_MS).toISOString().slice(0, 10);
}

/** The epoch day of a `YYYY-MM-DD` (or `YYYYMMDD`) text. */
export function parseDay(text: string): number {
  const iso = text.length === 8 ? `${text.slice(0, 4)}-${text.slice(4, 6)}-${text.slice(6)}` : text;
  return epochDay(new Date(`${iso}T00:00:00Z`));
}

/** Groups orders by customer into histories of distinct days (customers in id order). */
export function customerHistories(orders: Iterable<OrderRow>): CustomerHistory[] {
  const byCustomer = new Map<string, Map<number, number>>();
  for (const order of orders) {
    let days = byCustomer.get(order.customer);
    if (!days) byCustomer.set(order.customer, days = new Map());
    days.set(order.day, (days.get(order.day) ?? 0) + order.total);
  }
  const ids = [...byCustomer.keys()].sort((a, b) => a < b ? -1 : a > b ? 1 : 0);
  return ids.map((customer) => {
    const days = byCustomer.get(customer)!;
    const sorted = [...days.keys()].sort((a, b) => a - b);
    return { customer, days: sorted, totals: sorted.map((d) => days.get(d)!) };
  });
}

/** The customer's row as of `cutOffDay` (days after it ignored); null if she had not bought yet. */
export function rfmRow(history: CustomerHistory, cutOffDay: number): RfmRow | null {
  const first = history.days[0];
  if (first === undefined || first > cutOffDay) return null;
  let x = 0;
  let last = first;
  let repeatSpend = 0;
  for (let i = 1; i < history.days.length && history.days[i]! <= cutOffDay; i++) {
    x++;
    last = history.days[i]!;
    repeatSpend += history.totals[i]!;
  }
  return {
    customer: history.customer,
    x,
    t_x: last - first,
    T: cutOffDay - first,
    spend: x > 0 ? repeatSpend / x : 0,
  };
}

/** A customer's mean total per order day (her own average order value). */
export function meanDayTotal(history: CustomerHistory): number {
  return history.totals.reduce((s, t) => s + t, 0) / history.totals.length;
}

/** Every customer's row as of `cutOffDay`, leaving out those first seen after it. */
export function rfmSummary(histories: CustomerHistory[], cutOffDay: number): RfmRow[] {
  const rows: RfmRow[] = [];
  for (const history of histories) {
    const row = rfmRow(history, cutOffDay);
    if (row) rows.push(row);
  }
  return rows;
}

/** Order days of a history within (fromDay, toDay]: the repeat orders of a holdout period. */
export function ordersBetween(history: CustomerHistory, fromDay: number, toDay: number): number {
  let n = 0;
  for (const day of history.days) if (day > fromDay && day <= toDay) n++;
  return n;
}
