/**
 * The forms Apache Unomi accepts for typed condition values, read to one canonical form: numbers
 * written as strings (Unomi parses `"25"` for an integer parameter), and dates as epoch
 * milliseconds (Unomi parses dates as Elasticsearch's `strict_date_optional_time||epoch_millis`).
 *
 * @module
 */
const _INTEGER_TEXT = /^[+-]?\d{1,16}$/;
const _NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,3})?$/;
// Epoch milliseconds a Date holds: ±100,000,000 days around 1970.
const _MAX_TIME = 8.64e15;

/** An integer parameter: a JSON integer or a string of digits, as a safe integer; else undefined. */
export function integerValue(value: unknown): number | undefined {
  const n = typeof value === "string" && _INTEGER_TEXT.test(value) ? Number(value) : value;
  return Number.isSafeInteger(n) ? n as number : undefined;
}

/** A number parameter: a finite JSON number or a decimal string; else undefined. */
export function numberValue(value: unknown): number | undefined {
  const n = typeof value === "string" && _NUMBER_TEXT.test(value) ? Number(value) : value;
  return typeof n === "number" && Number.isFinite(n) ? n : undefined;
}

/**
 * A date parameter as text: a string as written (ISO 8601, epoch milliseconds or date math, for
 * the caller to check), a JSON integer (epoch milliseconds) as its ISO 8601 instant; else
 * undefined.
 */
export function dateText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (Number.isSafeInteger(value) && Math.abs(value as number) <= _MAX_TIME) {
    return new Date(value as number).toISOString();
  }
  return undefined;
}
