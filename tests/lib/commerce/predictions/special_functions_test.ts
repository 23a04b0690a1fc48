import assert from "node:assert/strict";
import { hyp2f1, lnBeta, lnGamma } from "../../../../lib/commerce/predictions/special_functions.ts";

const close = (a: number, b: number, tolerance = 1e-10) =>
  assert.ok(Math.abs(a - b) <= tolerance * Math.max(1, Math.abs(b)), `${a} != ${b}`);

Deno.test("lnGamma matches factorials and known values", () => {
  close(lnGamma(1), 0);
  close(lnGamma(2), 0);
  close(lnGamma(5), Math.log(24));
  close(lnGamma(0.5), 0.5 * Math.log(Math.PI));
  close(lnGamma(0.243), 1.3180435846996699, 1e-12); // Python math.lgamma(0.243)
  close(lnGamma(171), 706.5730622457874);
  assert.ok(Number.isNaN(lnGamma(0)));
});

Deno.test("lnBeta is symmetric and matches B(2, 3) = 1/12", () => {
  close(lnBeta(2, 3), Math.log(1 / 12));
  close(lnBeta(0.7, 2.4), lnBeta(2.4, 0.7));
});

Deno.test("hyp2f1 matches closed forms", () => {
  // 2F1(1, 1; 2; z) = -ln(1 - z) / z
  for (const z of [0.1, 0.5, 0.9, 0.99]) close(hyp2f1(1, 1, 2, z), -Math.log(1 - z) / z, 1e-12);
  // 2F1(a, b; b; z) = (1 - z)^-a
  close(hyp2f1(0.3, 2.5, 2.5, 0.8), Math.pow(0.2, -0.3), 1e-12);
  assert.equal(hyp2f1(1, 2, 3, 0), 1);
  assert.ok(Number.isNaN(hyp2f1(1, 2, 3, 1)));
});
