/**
 * The two purchase-count models, fitted by maximum likelihood: BG/NBD (Fader, Hardie and Lee
 * 2005, "Counting Your Customers the Easy Way") and MBG/NBD (Batislam, Denizel and Filiztekin
 * 2007), which lets a customer drop out right after her first purchase too, so a one-time buyer's
 * P(alive) is below 1 (under BG/NBD it is always 1). Purchases follow a Poisson process whose
 * rate is gamma(r, alpha) across customers; after each purchase (MBG/NBD: and at the first) the
 * customer drops out with a probability that is beta(a, b) across customers. Time is in days.
 *
 * @module
 */
import { hyp2f1, lnGamma } from "./special_functions.ts";
import { nelderMead } from "./nelder_mead.ts";

/** The purchase models. */
export type PurchaseModel = "bgnbd" | "mbgnbd";

/** Fitted parameters of either model (alpha in days). */
export interface PurchaseParams {
  r: number;
  alpha: number;
  a: number;
  b: number;
}

/** What the purchase models read of a customer (see rfm_summary.ts). */
export interface PurchaseRow {
  x: number;
  t_x: number;
  T: number;
}

/**
 * Customers grouped by identical (x, t_x, T), as columns: the likelihood is evaluated once per
 * group, its log-gammas once per distinct x, and (times being whole days) ln(alpha + t) once per
 * day count, so that one evaluation over a large brand stays a tight loop.
 */
interface _Groups {
  size: number;
  x: Float64Array;
  t_x: Float64Array;
  T: Float64Array;
  n: Float64Array;
  /** Index of the group's x in `distinctX`. */
  xIndex: Int32Array;
  distinctX: number[];
  /** Every t_x and T is a whole number up to `maxTime`: ln(alpha + t) comes from a table. */
  wholeTimes: boolean;
  maxTime: number;
}

function _groups(rows: readonly PurchaseRow[]): _Groups {
  const byKey = new Map<string, number>();
  const x: number[] = [];
  const t_x: number[] = [];
  const T: number[] = [];
  const n: number[] = [];
  for (const row of rows) {
    const key = `${row.x}|${row.t_x}|${row.T}`;
    const at = byKey.get(key);
    if (at !== undefined) {
      n[at]!++;
      continue;
    }
    byKey.set(key, x.length);
    x.push(row.x);
    t_x.push(row.t_x);
    T.push(row.T);
    n.push(1);
  }
  const distinctX = [...new Set(x)].sort((a, b) => a - b);
  const indexOfX = new Map(distinctX.map((v, i) => [v, i]));
  let wholeTimes = true;
  let maxTime = 0;
  for (let i = 0; i < x.length; i++) {
    if (!Number.isInteger(t_x[i]!) || !Number.isInteger(T[i]!) || t_x[i]! < 0) wholeTimes = false;
    maxTime = Math.max(maxTime, T[i]!, t_x[i]!);
  }
  return {
    size: x.length,
    x: Float64Array.from(x),
    t_x: Float64Array.from(t_x),
    T: Float64Array.from(T),
    n: Float64Array.from(n),
    xIndex: Int32Array.from(x, (v) => indexOfX.get(v)!),
    distinctX,
    wholeTimes: wholeTimes && maxTime <= 1_000_000,
    maxTime,
  };
}

/** ln(e^u + e^v) without overflow. */
function _logAddExp(u: number, v: number): number {
  const m = Math.max(u, v);
  return m + Math.log(Math.exp(u - m) + Math.exp(v - m));
}

/** The log-likelihood of one customer under the model. */
export function logLikelihood(
  model: PurchaseModel,
  { r, alpha, a, b }: PurchaseParams,
  { x, t_x, T }: PurchaseRow,
): number {
  return _logLikelihood(model, r, alpha, a, b, x, t_x, T, _xTerms(model, r, a, b, x));
}

/** The parts of the log-likelihood that depend on x only (log-gammas: costly, shared). */
function _xTerms(model: PurchaseModel, r: number, a: number, b: number, x: number): number {
  const shift = model === "mbgnbd" ? 1 : 0;
  return lnGamma(r + x) - lnGamma(r) + lnGamma(a + b) + lnGamma(b + x + shift) - lnGamma(b) -
    lnGamma(a + b + x + shift);
}

function _logLikelihood(
  model: PurchaseModel,
  r: number,
  alpha: number,
  a: number,
  b: number,
  x: number,
  t_x: number,
  T: number,
  xTerms: number,
): number {
  const base = xTerms + r * Math.log(alpha);
  const stay = -(r + x) * Math.log(alpha + T);
  if (model === "bgnbd") {
    if (x === 0) return base + stay;
    const left = Math.log(a) - Math.log(b + x - 1) - (r + x) * Math.log(alpha + t_x);
    return base + _logAddExp(stay, left);
  }
  const left = Math.log(a) - Math.log(b + x) - (r + x) * Math.log(alpha + t_x);
  return base + _logAddExp(stay, left);
}

/** The mean log-likelihood of the grouped rows under the parameters. */
function _meanLogLikelihood(
  model: PurchaseModel,
  params: PurchaseParams,
  groups: _Groups,
  total: number,
): number {
  const { r, alpha, a, b } = params;
  const shift = model === "mbgnbd" ? 1 : 0;
  const logAlpha = Math.log(alpha);
  const logA = Math.log(a);
  // Per distinct x: the log-gamma terms and ln(a / (b + x − 1)) (MBG/NBD: b + x).
  const xTerms = new Float64Array(groups.distinctX.length);
  const leftTerms = new Float64Array(groups.distinctX.length);
  for (let i = 0; i < groups.distinctX.length; i++) {
    const x = groups.distinctX[i]!;
    xTerms[i] = _xTerms(model, r, a, b, x) + r * logAlpha;
    leftTerms[i] = logA - Math.log(b + x - 1 + shift);
  }
  let table: Float64Array | null = null;
  if (groups.wholeTimes) {
    table = new Float64Array(groups.maxTime + 1);
    for (let d = 0; d <= groups.maxTime; d++) table[d] = Math.log(alpha + d);
  }
  const { x, t_x, T, n, xIndex } = groups;
  let sum = 0;
  for (let i = 0; i < groups.size; i++) {
    const xi = x[i]!;
    const k = xIndex[i]!;
    const rx = r + xi;
    const stay = -rx * (table ? table[T[i]!]! : Math.log(alpha + T[i]!));
    let ll: number;
    if (xi === 0 && shift === 0) {
      ll = stay;
    } else {
      const left = leftTerms[k]! - rx * (table ? table[t_x[i]!]! : Math.log(alpha + t_x[i]!));
      ll = stay > left
        ? stay + Math.log1p(Math.exp(left - stay))
        : left + Math.log1p(Math.exp(stay - left));
    }
    sum += n[i]! * (xTerms[k]! + ll);
  }
  return sum / total;
}

/** A fit: the parameters and the total log-likelihood at them. */
export interface PurchaseFit {
  params: PurchaseParams;
  logLikelihood: number;
}

/**
 * The maximum-likelihood parameters, by Nelder-Mead on the log-parameters from `start`, by
 * default r = a = b = 1 and alpha = the mean T: deterministic for the same rows and start.
 */
export function fitPurchaseModel(
  model: PurchaseModel,
  rows: readonly PurchaseRow[],
  start?: PurchaseParams,
): PurchaseFit {
  if (rows.length === 0) throw new RangeError("no customers to fit");
  const groups = _groups(rows);
  const meanT = rows.reduce((s, row) => s + row.T, 0) / rows.length;
  const from = start
    ? [Math.log(start.r), Math.log(start.alpha), Math.log(start.a), Math.log(start.b)]
    : [0, Math.log(Math.max(meanT, 1)), 0, 0];
  const unpack = (p: number[]): PurchaseParams => ({
    r: Math.exp(p[0]!),
    alpha: Math.exp(p[1]!),
    a: Math.exp(p[2]!),
    b: Math.exp(p[3]!),
  });
  const found = nelderMead(
    (p) => -_meanLogLikelihood(model, unpack(p), groups, rows.length),
    from,
    // Far below the 1% the published estimates are checked to; tighter only costs evaluations.
    { tolerance: 1e-10, pointTolerance: 1e-6, maxIterations: 4_000 },
  );
  return { params: unpack(found.point), logLikelihood: -found.value * rows.length };
}

/** P(alive): the probability the customer has not dropped out by T. */
export function pAlive(model: PurchaseModel, params: PurchaseParams, row: PurchaseRow): number {
  const { r, alpha, a, b } = params;
  const { x, t_x, T } = row;
  if (model === "bgnbd" && x === 0) return 1;
  const lead = model === "bgnbd" ? b + x - 1 : b + x;
  const odds = Math.exp(Math.log(a / lead) + (r + x) * Math.log((alpha + T) / (alpha + t_x)));
  return 1 / (1 + odds);
}

/** Expected purchases in (0, t] of a new customer (the model's curve). */
export function expectedPurchases(model: PurchaseModel, params: PurchaseParams, t: number): number {
  const { r, alpha, a, b } = params;
  const z = t / (alpha + t);
  const decay = Math.pow(alpha / (alpha + t), r);
  if (model === "bgnbd") {
    return (a + b - 1) / (a - 1) * (1 - decay * hyp2f1(r, b, a + b - 1, z));
  }
  return b / (a - 1) * (1 - decay * hyp2f1(r, b + 1, a + b, z));
}

/** Expected purchases of the customer in the next `t` days (T, T + t]. */
export function conditionalExpectedPurchases(
  model: PurchaseModel,
  params: PurchaseParams,
  row: PurchaseRow,
  t: number,
): number {
  const { r, alpha, a, b } = params;
  const { x, T } = row;
  const z = t / (alpha + T + t);
  const decay = Math.pow((alpha + T) / (alpha + T + t), r + x);
  const shift = model === "mbgnbd" ? 1 : 0;
  const c = a + b + x - 1 + shift;
  const body = c / (a - 1) * (1 - decay * hyp2f1(r + x, b + x + shift, c, z));
  return body * pAlive(model, params, row);
}

/** The expected wait (days) to the next purchase under the posterior purchase rate. */
export function expectedWaitDays(params: PurchaseParams, row: PurchaseRow): number {
  return (params.alpha + row.T) / (params.r + row.x);
}
