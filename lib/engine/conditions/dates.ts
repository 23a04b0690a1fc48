/**
 * Dates in conditions: ISO 8601 date-times, epoch milliseconds and date math (`now-30d`, `now/d`,
 * `...||+1M`), each value resolved to the span of its precision, as Elasticsearch does.
 *
 * @module
 */

const _SECOND = 1000;
const _MINUTE = 60 * _SECOND;
const _HOUR = 60 * _MINUTE;
/** One day in milliseconds. */
export const DAY = 24 * _HOUR;
const _MAX_TIME = 8.64e15;

/**
 * The instants a condition may name: years 1 to 9999 in UTC, after any offset and date math.
 * PostgreSQL stores 4713 BC to 294276 AD, but year 0 and below are written differently there
 * (BC) and JavaScript writes years past 9999 with a sign; inside this window a value reads the
 * same in both. The end of a span may be DATE_WINDOW_END itself (the day after 9999-12-31).
 */
export const DATE_WINDOW_START = Date.parse("0001-01-01T00:00:00.000Z");
/** The first instant after the window (10000-01-01T00:00:00Z). */
export const DATE_WINDOW_END = Date.parse("+010000-01-01T00:00:00.000Z");

/** Whether an epoch-ms instant lies in the window of years 1 to 9999 (UTC). */
export function inDateWindow(ms: number): boolean {
  return Number.isFinite(ms) && ms >= DATE_WINDOW_START && ms < DATE_WINDOW_END;
}

/**
 * An instant of the window (or its end) as text PostgreSQL reads as timestamptz: ISO 8601, but
 * the year 10000 written without the sign and padding JavaScript gives it.
 */
export function timestampText(time: Date | number): string {
  const ms = typeof time === "number" ? time : time.getTime();
  if (!(ms >= DATE_WINDOW_START && ms <= DATE_WINDOW_END)) {
    throw new RangeError(`instant ${ms} is outside the years 1 to 9999`);
  }
  return new Date(ms).toISOString().replace(/^\+0*/, "");
}

// The same grammar as cdp_try_timestamptz (migration 4): a date, optionally a time with minutes,
// seconds and a fraction, optionally an offset; no offset means UTC.
const _ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|([+-])(\d{2})(?::?(\d{2}))?)?)?$/;

function _daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * Parses an ISO 8601 date-time to epoch ms (fraction truncated to ms) and its precision. The
 * instant may fall outside years 1 to 9999 once its offset is applied: see {@linkcode dateValue}.
 */
export function parseIso(text: string): { ms: number; unit: number } | null {
  if (text.length > 40) return null;
  const m = _ISO.exec(text);
  if (!m) return null;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [h, mi, s] = [Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0)];
  const ms = m[7] ? Number(m[7].padEnd(3, "0").slice(0, 3)) : 0;
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > _daysInMonth(y, mo)) return null;
  if (h > 23 || mi > 59 || s > 59) return null;
  let offset = 0;
  if (m[9]) {
    const [oh, om] = [Number(m[10]), Number(m[11] ?? 0)];
    if (oh > 23 || om > 59) return null;
    offset = (m[9] === "-" ? -1 : 1) * (oh * 60 + om) * _MINUTE;
  }
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, ms);
  const unit = m[4] === undefined ? DAY : m[6] === undefined ? _MINUTE : m[7] ? 1 : _SECOND;
  return { ms: date.getTime() - offset, unit };
}

// Elasticsearch's `strict_date_optional_time||epoch_millis` (what Unomi parses dates with) reads
// a string of four digits or fewer as a year, so only longer ones are epoch milliseconds here.
const _EPOCH = /^-?\d{5,16}$/;

/**
 * Epoch milliseconds written as a string of digits (5 to 16, optionally negative): the instant
 * with a precision of one millisecond, or null.
 */
export function parseEpoch(text: string): { ms: number; unit: number } | null {
  if (!_EPOCH.test(text)) return null;
  const ms = Number(text);
  return Number.isSafeInteger(ms) && Math.abs(ms) <= _MAX_TIME ? { ms, unit: 1 } : null;
}

function _addMonths(t: number, months: number): number {
  const date = new Date(t);
  if (Number.isNaN(date.getTime())) return NaN;
  const total = date.getUTCFullYear() * 12 + date.getUTCMonth() + months;
  const year = Math.floor(total / 12);
  if (!Number.isFinite(total) || Math.abs(year) > 270_000) return NaN;
  const month = total - year * 12;
  // Like Java time (and Elasticsearch): Jan 31 + 1M is the last day of February.
  const day = Math.min(date.getUTCDate(), _daysInMonth(year, month + 1));
  date.setUTCFullYear(year, month, day);
  return date.getTime();
}

function _addUnit(t: number, amount: number, unit: string): number {
  switch (unit) {
    case "y":
      return _addMonths(t, amount * 12);
    case "M":
      return _addMonths(t, amount);
    case "w":
      return t + amount * 7 * DAY;
    case "d":
      return t + amount * DAY;
    case "h":
    case "H":
      return t + amount * _HOUR;
    case "m":
      return t + amount * _MINUTE;
    default:
      return t + amount * _SECOND;
  }
}

/** Rounds an epoch-ms time down to the start of its date-math unit (UTC). */
export function floorUnit(t: number, unit: string): number {
  const mod = (size: number) => t - (((t % size) + size) % size);
  switch (unit) {
    case "y":
    case "M": {
      const date = new Date(t);
      const floored = new Date(0);
      floored.setUTCFullYear(date.getUTCFullYear(), unit === "y" ? 0 : date.getUTCMonth(), 1);
      return floored.getTime();
    }
    case "w": {
      const day = mod(DAY);
      return day - ((new Date(day).getUTCDay() + 6) % 7) * DAY; // weeks start on Monday
    }
    case "d":
      return mod(DAY);
    case "h":
    case "H":
      return mod(_HOUR);
    case "m":
      return mod(_MINUTE);
    default:
      return mod(_SECOND);
  }
}

const _MATH_OP = /^(?:([+-])(\d{1,9})([yMwdhHms])|\/([yMwdhHms]))/;

/**
 * A date value (ISO 8601 or epoch milliseconds) as its span `[ms, ms + unit)`, or null when it
 * is malformed or its span leaves years 1 to 9999 (UTC, its offset applied).
 */
export function dateValue(text: string): { ms: number; unit: number } | null {
  const parsed = parseIso(text) ?? parseEpoch(text);
  if (!parsed || !inDateWindow(parsed.ms) || !inDateWindow(parsed.ms + parsed.unit - 1)) {
    return null;
  }
  return parsed;
}

/**
 * Elasticsearch date math to epoch ms. With `roundUp` (how Elasticsearch reads the upper end of
 * a range), a rounding or a partial ISO date yields the LAST millisecond of its unit.
 */
export function dateMath(expr: string, now: Date, roundUp: boolean): number | null {
  if (expr.length > 100) return null;
  let t: number;
  let rest: string;
  if (expr.startsWith("now")) {
    t = now.getTime();
    rest = expr.slice(3);
  } else {
    const bar = expr.indexOf("||");
    const text = bar < 0 ? expr : expr.slice(0, bar);
    const anchor = parseIso(text) ?? parseEpoch(text);
    if (!anchor) return null;
    t = roundUp ? anchor.ms + anchor.unit - 1 : anchor.ms;
    rest = bar < 0 ? "" : expr.slice(bar + 2);
  }
  for (let ops = 0; rest.length > 0; ops++) {
    const m = _MATH_OP.exec(rest);
    if (!m || ops >= 10) return null;
    rest = rest.slice(m[0].length);
    if (m[4]) {
      t = floorUnit(t, m[4]);
      if (roundUp) t = _addUnit(t, 1, m[4]) - 1;
    } else {
      t = _addUnit(t, (m[1] === "-" ? -1 : 1) * Number(m[2]), m[3]!);
    }
    if (!Number.isFinite(t) || Math.abs(t) > _MAX_TIME) return null;
  }
  // The result is what must fit the window: an anchor near its edge may leave it by an offset.
  return inDateWindow(t) ? t : null;
}

/**
 * Resolves Unomi/Elasticsearch date math: `now`, or an ISO 8601 or epoch-milliseconds anchor
 * followed by `||`, then any
 * of `+<n><unit>`, `-<n><unit>`, `/<unit>` (units y M w d h H m s; rounding floors in UTC, weeks
 * start on Monday; adding months clamps the day like Java). A plain ISO 8601 date-time or epoch
 * milliseconds is valid too. With `roundUp` (the upper end of a range) rounding and partial dates give the last
 * millisecond of their unit instead. Returns null when invalid or outside years 1 to 9999.
 */
export function resolveDateExpr(
  expr: string,
  now: Date,
  options: { roundUp?: boolean } = {},
): Date | null {
  if (typeof expr !== "string") return null;
  const t = dateMath(expr, now, options.roundUp ?? false);
  return t === null ? null : new Date(t);
}

/**
 * A date value as the span [lo, hi) of epoch milliseconds it stands for (Elasticsearch reads
 * ranges this way); null when malformed or outside the years 1 to 9999 (see dateValue, dateMath).
 */
export function spanOf(
  kind: "date" | "dateExpr",
  value: string,
  now: Date,
): [number, number] | null {
  if (kind === "date") {
    const parsed = dateValue(value);
    return parsed ? [parsed.ms, parsed.ms + parsed.unit] : null;
  }
  const lo = dateMath(value, now, false);
  const last = dateMath(value, now, true);
  return lo === null || last === null ? null : [lo, last + 1];
}
