import assert from "node:assert/strict";
import {
  barChart,
  createChartRenderer,
  lineChart,
  treemapChart,
} from "../../../lib/dashboard/charts.ts";

Deno.test("charts: bars, lines and treemaps render to standalone SVG with their labels", () => {
  const input = { labels: ["alpha", "beta", "gamma"], values: [3, 0, 7] };
  for (const svg of [barChart(input), barChart({ ...input, horizontal: true }), lineChart(input)]) {
    assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.match(svg, /<\/svg>$/);
    for (const label of input.labels) assert.match(svg, new RegExp(`>${label}<`));
  }
  const treemap = treemapChart(input);
  assert.match(treemap, />alpha</);
  assert.match(treemap, />gamma</);
});

Deno.test("charts: labels are escaped, and the size is the one asked", () => {
  const svg = barChart({
    labels: ['<script>alert("x")</script>', "a&b"],
    values: [1, 2],
    size: { width: 320, height: 200 },
  });
  assert.doesNotMatch(svg, /<script/);
  assert.match(svg, /&lt;script&gt;/);
  assert.match(svg, /a&amp;b/);
  assert.match(svg, /^<svg width="320" height="200"/);
  // Text styles sit in double-quoted attributes: the font stack must not close them.
  for (const style of svg.matchAll(/style="([^"]*)"/g)) assert.doesNotMatch(style[1]!, /"/);
});

// ECharts numbers each instance's class names and ids (zr<instance>-cls-<n>), unique per process.
const same = (svg: string) => svg.replace(/zr\d+-(cls-|c)\d+/g, "zr");

Deno.test("chart renderer: the SVG of each kind is the function's, remembered or not", () => {
  const renderer = createChartRenderer({ entries: 2 });
  const inputs = [1, 2, 3, 1].map((n) => ({ labels: ["a", "b"], values: [n, n * 2] }));
  for (const input of inputs) {
    const horizontal = { ...input, horizontal: true };
    assert.equal(same(renderer.bar(input)), same(barChart(input)));
    assert.equal(same(renderer.bar(horizontal)), same(barChart(horizontal)));
    assert.equal(same(renderer.line(input)), same(lineChart(input)));
    assert.equal(same(renderer.treemap(input)), same(treemapChart(input)));
  }
  // Remembered: the same input gives the very same SVG, instance numbers included.
  assert.equal(renderer.line(inputs[0]!), renderer.line(inputs[0]!));
});
