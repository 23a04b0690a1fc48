import assert from "node:assert/strict";
import { nelderMead } from "../../../../lib/commerce/predictions/nelder_mead.ts";

Deno.test("nelderMead finds the minimum of the Rosenbrock function", () => {
  const rosenbrock = ([x, y]: number[]) => 100 * (y! - x! * x!) ** 2 + (1 - x!) ** 2;
  const found = nelderMead(rosenbrock, [-1.2, 1], { tolerance: 1e-12, maxIterations: 10_000 });
  assert.ok(Math.abs(found.point[0]! - 1) < 1e-4, String(found.point));
  assert.ok(Math.abs(found.point[1]! - 1) < 1e-4, String(found.point));
});

Deno.test("nelderMead is deterministic and treats non-finite values as outside", () => {
  const f = ([x]: number[]) => x! < 0 ? Number.NaN : (x! - 2) ** 2;
  const one = nelderMead(f, [5]);
  const two = nelderMead(f, [5]);
  assert.deepEqual(one, two);
  assert.ok(Math.abs(one.point[0]! - 2) < 1e-4);
});
