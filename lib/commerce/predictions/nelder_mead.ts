/**
 * Deterministic unconstrained minimization by the Nelder-Mead simplex method (standard
 * coefficients), with restarts from the best point so a collapsed simplex cannot stop it short of
 * the minimum. Same function and start, same answer: no randomness anywhere.
 *
 * @module
 */

/** The minimum found: its point, value and how many evaluations it took. */
export interface Minimum {
  point: number[];
  value: number;
  evaluations: number;
}

/** Options of {@linkcode nelderMead}. */
export interface NelderMeadOptions {
  /** Initial simplex edge along each axis. */
  step?: number;
  /** Stop when the simplex's values differ by less than this (relative)... */
  tolerance?: number;
  /** ...and its points by less than this along every axis. */
  pointTolerance?: number;
  /** Iterations per run. */
  maxIterations?: number;
  /** Runs from the last best point (the first included). */
  restarts?: number;
}

/** Minimizes `f` from `start`; non-finite values count as +Infinity (outside the domain). */
export function nelderMead(
  f: (point: number[]) => number,
  start: number[],
  options: NelderMeadOptions = {},
): Minimum {
  const step = options.step ?? 0.5;
  const tolerance = options.tolerance ?? 1e-10;
  const pointTolerance = options.pointTolerance ?? tolerance * 10;
  const maxIterations = options.maxIterations ?? 5_000;
  const restarts = options.restarts ?? 3;
  let evaluations = 0;
  const evaluate = (p: number[]) => {
    evaluations++;
    const v = f(p);
    return Number.isFinite(v) ? v : Number.POSITIVE_INFINITY;
  };
  let best = { point: [...start], value: evaluate(start) };
  for (let run = 0; run < restarts; run++) {
    const result = _run(
      evaluate,
      best.point,
      best.value,
      step,
      tolerance,
      pointTolerance,
      maxIterations,
    );
    const improved = result.value < best.value - tolerance * (1 + Math.abs(best.value));
    if (result.value <= best.value) best = result;
    if (!improved && run > 0) break;
  }
  return { ...best, evaluations };
}

function _run(
  evaluate: (p: number[]) => number,
  start: number[],
  startValue: number,
  step: number,
  tolerance: number,
  pointTolerance: number,
  maxIterations: number,
) {
  const n = start.length;
  const points: number[][] = [start];
  const values: number[] = [startValue];
  for (let i = 0; i < n; i++) {
    const p = [...start];
    p[i]! += step;
    points.push(p);
    values.push(evaluate(p));
  }
  const order = points.map((_, i) => i);
  for (let iteration = 0; iteration < maxIterations; iteration++) {
    order.sort((i, j) => values[i]! - values[j]! || i - j);
    const bestIndex = order[0]!;
    const worst = order[n]!;
    const secondWorst = order[n - 1]!;
    const spread = Math.abs(values[worst]! - values[bestIndex]!);
    let size = 0;
    for (const p of points) {
      for (let k = 0; k < n; k++) size = Math.max(size, Math.abs(p[k]! - points[bestIndex]![k]!));
    }
    if (spread <= tolerance * (1 + Math.abs(values[bestIndex]!)) && size <= pointTolerance) break;
    const centroid = new Array<number>(n).fill(0);
    for (const i of order.slice(0, n)) {
      for (let k = 0; k < n; k++) centroid[k]! += points[i]![k]! / n;
    }
    const along = (t: number) => centroid.map((c, k) => c + t * (points[worst]![k]! - c));
    const reflected = along(-1);
    const fr = evaluate(reflected);
    if (fr < values[bestIndex]!) {
      const expanded = along(-2);
      const fe = evaluate(expanded);
      if (fe < fr) {
        points[worst] = expanded;
        values[worst] = fe;
      } else {
        points[worst] = reflected;
        values[worst] = fr;
      }
      continue;
    }
    if (fr < values[secondWorst]!) {
      points[worst] = reflected;
      values[worst] = fr;
      continue;
    }
    const outside = fr < values[worst]!;
    const contracted = along(outside ? -0.5 : 0.5);
    const fc = evaluate(contracted);
    if (fc < (outside ? fr : values[worst]!)) {
      points[worst] = contracted;
      values[worst] = fc;
      continue;
    }
    // Shrink toward the best point.
    for (const i of order.slice(1)) {
      points[i] = points[i]!.map((x, k) =>
        points[bestIndex]![k]! + 0.5 * (x - points[bestIndex]![k]!)
      );
      values[i] = evaluate(points[i]!);
    }
  }
  order.sort((i, j) => values[i]! - values[j]! || i - j);
  return { point: points[order[0]!]!, value: values[order[0]!]! };
}
