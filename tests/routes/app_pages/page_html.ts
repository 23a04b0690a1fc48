/** Reading the dashboard's HTML in tests: its data tables, stats and forms, as text. */

/** Text of an HTML fragment: tags dropped, entities decoded, whitespace collapsed. */
export function textOf(html: string): string {
  return html.replace(/<[^>]*>/g, " ").replace(/&lt;/g, "<").replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, "&")
    .replace(/\s+/g, " ").trim();
}

/** The body rows of the table `data-table="<id>"`, each as its cells' text. */
export function tableRows(html: string, id: string): string[][] {
  const table = new RegExp(`<table data-table="${id}">([\\s\\S]*?)</table>`).exec(html);
  if (!table) throw new Error(`no table ${id}`);
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(table[1]!)?.[1] ?? "";
  return [...body.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((row) =>
    [...row[1]!.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((cell) => textOf(cell[1]!))
  );
}

/** The value of the stat `data-stat="<id>"`. */
export function statValue(html: string, id: string): string {
  const stat = new RegExp(
    `data-stat="${id}">[\\s\\S]*?<div class="value">([\\s\\S]*?)</div>`,
  ).exec(html);
  if (!stat) throw new Error(`no stat ${id}`);
  return textOf(stat[1]!);
}

/** The value of the first hidden input named `name`. */
export function hiddenValue(html: string, name: string): string {
  const input = new RegExp(`<input type="hidden" name="${name}" value="([^"]*)"`).exec(html);
  if (!input) throw new Error(`no hidden ${name}`);
  return input[1]!;
}

/** The SVG of the chart card `data-chart="<id>"`. */
export function chartSvg(html: string, id: string): string {
  const card = new RegExp(`data-chart="${id}"[\\s\\S]*?(<svg[\\s\\S]*?</svg>)`).exec(html);
  if (!card) throw new Error(`no chart ${id}`);
  return card[1]!;
}
