/**
 * Predictions benchmark: fitting a brand of 100,000 customers (both purchase models on the full
 * history and on the calibration period, Gamma-Gamma, the holdout validation and every
 * customer's predicted CLV: what one refit computes after loading the orders), beside a floor in
 * a process of its own: one BG/NBD fit written the textbook way (Nelder-Mead over the
 * per-customer log-likelihood, log-gammas evaluated for every customer, no grouping).
 *
 *   deno task bench:predictions      (deno run -A bench/predictions_load.ts)
 *
 * The customers are simulated from MBG/NBD with CDNOW-like parameters in days (r 0.5, alpha 40,
 * a 0.9, b 1.6, first orders spread over the first year of two) and gamma-distributed spend,
 * deterministically (seeded); generation is not measured. Each side runs in a subprocess
 * (`--part ours` / `--part floor`) so neither warms the other's JIT or heap. Prints progress on
 * stderr and a markdown table on stdout; the target (ours under 10 s) is reported PASS/FAIL.
 *
 * Environment (optional): BENCH_CUSTOMERS (100000).
 */
import { intEnv } from "./bench_support.ts";
import { fitAndDistribute } from "../lib/commerce/predictions/brand_predictions.ts";
import type { CustomerHistory } from "../lib/commerce/predictions/rfm_summary.ts";
import { lnGamma } from "../lib/commerce/predictions/special_functions.ts";
import { nelderMead } from "../lib/commerce/predictions/nelder_mead.ts";

const CUSTOMERS = intEnv("BENCH_CUSTOMERS", 100_000);
const SPAN_DAYS = 730;
const CUT_OFF_DAY = 20_000;
const TARGET_MS = 10_000;

/** A seeded uniform generator (mulberry32). */
function _random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A gamma(shape, 1) draw (Marsaglia and Tsang; shape < 1 boosted). */
function _gamma(random: () => number, shape: number): number {
  if (shape < 1) return _gamma(random, shape + 1) * Math.pow(random(), 1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      // Box-Muller normal.
      x = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = random();
    if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v;
  }
}

/** The simulated brand's histories. */
export function simulatedHistories(customers: number): CustomerHistory[] {
  const random = _random(42);
  const histories: CustomerHistory[] = [];
  for (let c = 0; c < customers; c++) {
    const rate = _gamma(random, 0.5) / 40;
    const x = _gamma(random, 0.9);
    const drop = x / (x + _gamma(random, 1.6));
    const meanSpend = 20 + _gamma(random, 3) * 15;
    let day = CUT_OFF_DAY - SPAN_DAYS + Math.floor(random() * 365);
    const days: number[] = [];
    const totals: number[] = [];
    // MBG/NBD: a customer may drop out at the first purchase as after any other.
    for (;;) {
      if (days.at(-1) !== day) {
        days.push(day);
        totals.push(Math.round(meanSpend * _gamma(random, 4) / 4 * 100) / 100);
      }
      if (random() < drop) break;
      day += Math.ceil(-Math.log(1 - random()) / rate);
      if (day > CUT_OFF_DAY) break;
    }
    histories.push({ customer: String(c).padStart(7, "0"), days, totals });
  }
  return histories;
}

/** The floor: one BG/NBD fit, per-customer log-likelihood with its log-gammas, no grouping. */
function _floorFit(histories: CustomerHistory[]) {
  const rows = histories.map((h) => ({
    x: h.days.length - 1,
    t_x: h.days.at(-1)! - h.days[0]!,
    T: CUT_OFF_DAY - h.days[0]!,
  }));
  const negative = (p: number[]) => {
    const [r, alpha, a, b] = p.map(Math.exp) as [number, number, number, number];
    let sum = 0;
    for (const { x, t_x, T } of rows) {
      const base = lnGamma(r + x) - lnGamma(r) + r * Math.log(alpha) + lnGamma(a + b) +
        lnGamma(b + x) - lnGamma(b) - lnGamma(a + b + x);
      const stay = -(r + x) * Math.log(alpha + T);
      if (x === 0) {
        sum += base + stay;
        continue;
      }
      const left = Math.log(a) - Math.log(b + x - 1) - (r + x) * Math.log(alpha + t_x);
      const m = Math.max(stay, left);
      sum += base + m + Math.log(Math.exp(stay - m) + Math.exp(left - m));
    }
    return -sum / rows.length;
  };
  return nelderMead(negative, [0, Math.log(100), 0, 0], { tolerance: 1e-11, maxIterations: 4_000 });
}

async function _part(part: "ours" | "floor") {
  const histories = simulatedHistories(CUSTOMERS);
  const started = performance.now();
  if (part === "ours") {
    const fit = fitAndDistribute({ histories, cutOffDay: CUT_OFF_DAY, discountRate: 0 });
    const ms = performance.now() - started;
    console.log(JSON.stringify({ ms, model: fit.model, validation: fit.validation }));
  } else {
    const found = _floorFit(histories);
    const ms = performance.now() - started;
    console.log(JSON.stringify({ ms, evaluations: found.evaluations }));
  }
  await Promise.resolve();
}

async function _spawn(part: string): Promise<Record<string, unknown>> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, "--part", part],
    stderr: "inherit",
  }).output();
  if (output.code !== 0) throw new Error(`${part} failed (exit ${output.code})`);
  return JSON.parse(new TextDecoder().decode(output.stdout).trim());
}

if (import.meta.main) {
  const at = Deno.args.indexOf("--part");
  if (at >= 0) {
    await _part(Deno.args[at + 1] as "ours" | "floor");
  } else {
    console.error(`[predictions] ${CUSTOMERS} simulated customers; ours, then the floor`);
    const ours = await _spawn("ours");
    const floor = await _spawn("floor");
    const model = ours.model as Record<string, Record<string, number>>;
    const v = ours.validation as Record<string, number>;
    const fmt = (p: Record<string, number>) =>
      Object.entries(p).map(([k, x]) => `${k} ${typeof x === "number" ? x.toFixed(3) : x}`)
        .join(", ");
    console.error(`[predictions] BG/NBD ${fmt(model.bgnbd!)}`);
    console.error(
      `[predictions] MBG/NBD ${fmt(model.mbgnbd!)} (simulated: r 0.5, alpha 40, a 0.9, b 1.6)`,
    );
    console.error(
      `[predictions] selected ${model.selected}; holdout errors bgnbd ${
        v.bgnbd_error?.toFixed(1)
      }, mbgnbd ${v.mbgnbd_error?.toFixed(1)} of ${v.actual_repeat_orders} orders`,
    );
    const oursMs = ours.ms as number;
    console.log(`| Fit of ${CUSTOMERS.toLocaleString("en")} customers | time | target | verdict |`);
    console.log("| --- | --- | --- | --- |");
    console.log(
      `| ours: 4 purchase fits, Gamma-Gamma, validation, every CLV | ${
        (oursMs / 1000).toFixed(2)
      } s | < 10 s | ${oursMs < TARGET_MS ? "PASS" : "FAIL"} |`,
    );
    console.log(
      `| floor: one BG/NBD fit, textbook (${floor.evaluations} evaluations) | ${
        ((floor.ms as number) / 1000).toFixed(2)
      } s | — | — |`,
    );
  }
}
