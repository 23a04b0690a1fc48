/**
 * Server-side charts of the dashboard: Apache ECharts rendered to an SVG string without a
 * browser (its SSR mode), so the pages show data without client JavaScript. One chart instance
 * per render, disposed after; a renderer remembers the SVG of recent inputs, since a brand's
 * figures change only when its insight summaries do. Colours and type follow Shopify's Polaris.
 *
 * @module
 */
import * as echarts from "echarts";

/** Polaris colours the charts and the page styles share. */
export const PALETTE = {
  primary: "#005bd3",
  series: [
    "#005bd3",
    "#0094d5",
    "#29845a",
    "#b98900",
    "#8051ff",
    "#e51c00",
    "#616161",
    "#47c1bf",
    "#c05717",
    "#5c6ac4",
  ],
  text: "#303030",
  subdued: "#616161",
  border: "#e3e3e3",
} as const;

/** The font stack of the pages, given to the SVG text too. */
// Single quotes only: ECharts writes it inside a double-quoted style attribute.
export const FONT_STACK =
  "-apple-system, BlinkMacSystemFont, 'San Francisco', 'Segoe UI', Roboto, 'Helvetica Neue', sans-serif";

/** A chart's size in CSS pixels. */
export interface ChartSize {
  width: number;
  height: number;
}

const _DEFAULT_SIZE: ChartSize = { width: 560, height: 260 };

/** A category series: one value per label. */
export interface SeriesInput {
  labels: string[];
  values: number[];
  size?: ChartSize;
}

/** Vertical bars, one per label. */
export function barChart(input: SeriesInput & { horizontal?: boolean }): string {
  const category = {
    type: "category" as const,
    data: input.labels,
    // Every label of a short axis; ECharts would drop some that overlap.
    axisLabel: {
      color: PALETTE.subdued,
      width: 120,
      overflow: "truncate" as const,
      ...(input.labels.length <= 12 ? { interval: 0 } : {}),
    },
    axisLine: { lineStyle: { color: PALETTE.border } },
    axisTick: { show: false },
  };
  const value = {
    type: "value" as const,
    axisLabel: { color: PALETTE.subdued },
    splitLine: { lineStyle: { color: PALETTE.border } },
  };
  return _render(input, {
    grid: { left: input.horizontal ? 130 : 48, right: 24, top: 16, bottom: 32 },
    xAxis: input.horizontal ? value : category,
    yAxis: input.horizontal ? { ...category, inverse: true } : value,
    series: [{
      type: "bar",
      data: input.values,
      itemStyle: { color: PALETTE.primary, borderRadius: 3 },
      barMaxWidth: 40,
    }],
  });
}

/** Several named series of bars side by side per label, with a legend. */
export interface GroupedSeriesInput {
  labels: string[];
  series: { name: string; values: number[] }[];
  size?: ChartSize;
}

/** Grouped vertical bars: one bar per series at each label (actual beside predicted). */
export function groupedBarChart(input: GroupedSeriesInput): string {
  return _render({ labels: input.labels, values: [], size: input.size }, {
    grid: { left: 48, right: 24, top: 36, bottom: 32 },
    legend: { top: 0, textStyle: { color: PALETTE.subdued } },
    xAxis: {
      type: "category",
      data: input.labels,
      axisLabel: { color: PALETTE.subdued, interval: 0 },
      axisLine: { lineStyle: { color: PALETTE.border } },
      axisTick: { show: false },
    },
    yAxis: {
      type: "value",
      axisLabel: { color: PALETTE.subdued },
      splitLine: { lineStyle: { color: PALETTE.border } },
    },
    series: input.series.map((s, i) => ({
      type: "bar",
      name: s.name,
      data: s.values,
      itemStyle: { color: PALETTE.series[i % PALETTE.series.length], borderRadius: 2 },
      barMaxWidth: 24,
    })),
  });
}

/** A line over the labels in order (dates, months), with a light area under it. */
export function lineChart(input: SeriesInput): string {
  return _render(input, {
    grid: { left: 56, right: 24, top: 16, bottom: 32 },
    xAxis: {
      type: "category",
      data: input.labels,
      boundaryGap: false,
      axisLabel: { color: PALETTE.subdued },
      axisLine: { lineStyle: { color: PALETTE.border } },
    },
    yAxis: {
      type: "value",
      axisLabel: { color: PALETTE.subdued },
      splitLine: { lineStyle: { color: PALETTE.border } },
    },
    series: [{
      type: "line",
      data: input.values,
      showSymbol: input.values.length <= 31,
      symbolSize: 5,
      lineStyle: { color: PALETTE.primary, width: 2 },
      itemStyle: { color: PALETTE.primary },
      areaStyle: { color: "rgba(0, 91, 211, 0.08)" },
    }],
  });
}

/** A treemap: one tile per label sized by its value, labelled with the name and value. */
export function treemapChart(input: SeriesInput): string {
  return _render(input, {
    series: [{
      type: "treemap",
      roam: false,
      nodeClick: false,
      breadcrumb: { show: false },
      left: 0,
      top: 0,
      right: 0,
      bottom: 0,
      label: { show: true, formatter: "{b}\n{c}", color: "#ffffff", fontSize: 12 },
      itemStyle: { borderColor: "#ffffff", borderWidth: 2, gapWidth: 2 },
      data: input.labels.map((name, i) => ({
        name,
        value: input.values[i] ?? 0,
        itemStyle: { color: PALETTE.series[i % PALETTE.series.length] },
      })),
    }],
  });
}

function _render(input: SeriesInput, option: Record<string, unknown>): string {
  const size = input.size ?? _DEFAULT_SIZE;
  const chart = echarts.init(null, null, {
    renderer: "svg",
    ssr: true,
    width: size.width,
    height: size.height,
  });
  try {
    chart.setOption({
      animation: false,
      textStyle: { fontFamily: FONT_STACK, color: PALETTE.text },
      ...option,
    });
    return chart.renderToSVGString();
  } finally {
    chart.dispose();
  }
}

/** The chart kinds, each a pure function of its input. */
export interface ChartRenderer {
  bar(input: SeriesInput & { horizontal?: boolean }): string;
  line(input: SeriesInput): string;
  treemap(input: SeriesInput): string;
  grouped(input: GroupedSeriesInput): string;
}

/**
 * A renderer that remembers the SVG of its last `entries` distinct inputs (least recently used
 * out first): rendering costs milliseconds of CPU per chart, and reloads of a page between two
 * refreshes of the summaries draw the same charts.
 */
export function createChartRenderer(options: { entries: number }): ChartRenderer {
  const cache = new Map<string, string>();
  const remembered = <T>(kind: string, render: (input: T) => string) => (input: T): string => {
    const key = `${kind}:${JSON.stringify(input)}`;
    const hit = cache.get(key);
    if (hit !== undefined) {
      cache.delete(key);
      cache.set(key, hit);
      return hit;
    }
    const svg = render(input);
    if (cache.size >= options.entries) cache.delete(cache.keys().next().value!);
    cache.set(key, svg);
    return svg;
  };
  return {
    bar: remembered("bar", barChart),
    line: remembered("line", lineChart),
    treemap: remembered("treemap", treemapChart),
    grouped: remembered("grouped", groupedBarChart),
  };
}
