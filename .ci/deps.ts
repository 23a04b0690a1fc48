/**
 * The dependency rule (docs/architecture.md#the-dependency-rule), checked over the module graph
 * `deno info --json` gives for every entry point: no import circle between files, and every
 * import between layers points down the documented order (which rules out circles between
 * folders too). Tests, benchmarks and .ci are not in the graph: nothing the service runs imports
 * them. Usage: `deno task deps` (exit status 1 with one line per violation).
 *
 * @module
 */

/** What the service runs: its entry points and the files started as workers. */
export const ENTRY_POINTS = [
  "main.ts",
  "admin.ts",
  "workers/forwarder.ts",
  "dev.ts",
  "lib/store/pglite_init_worker.ts",
  "lib/shopify/bulk_partition_worker.ts",
];

/**
 * The layers, lowest first: a file may import its own layer's files and those of layers below
 * it, never above. `lib` is the files directly in lib/ (errors, log, ids, config, start-up
 * failure); `entry` the entry points.
 */
export const LAYERS = [
  "lib",
  "lib/store",
  "lib/tenancy",
  "lib/engine",
  "lib/ingest",
  "lib/commerce",
  "lib/privacy",
  "lib/audiences",
  "lib/shopify",
  "lib/dashboard",
  "lib/http",
  "lib/runtime",
  "lib/admin",
  "routes",
  "entry",
] as const;

/** Modules only entry points import: the CLI's runner stays out of the HTTP composition. */
export const ENTRY_ONLY = ["lib/admin/cli.ts"];

/** One import between two project files (paths relative to the repository). */
export interface Edge {
  from: string;
  to: string;
}

/** The layer of a project file, or null for a file outside every layer. */
export function layerOf(path: string): string | null {
  const parts = path.split("/");
  if (parts[0] === "lib") return parts.length === 2 ? "lib" : `lib/${parts[1]}`;
  if (parts[0] === "routes") return "routes";
  if (parts.length === 1 || parts[0] === "workers") return "entry";
  return null;
}

/**
 * Every violation of the rule in a graph: unknown layers, imports pointing up, an entry-only
 * module imported elsewhere, file circles.
 */
export function violations(edges: readonly Edge[]): string[] {
  const found: string[] = [];
  const rank = new Map<string, number>(LAYERS.map((layer, i) => [layer, i]));
  const unknown = new Set<string>();
  for (const { from, to } of edges) {
    for (const path of [from, to]) {
      const layer = layerOf(path);
      if (layer === null || !rank.has(layer)) unknown.add(layer ?? path);
    }
  }
  for (const name of [...unknown].sort()) {
    found.push(`${name}: not a layer of the documented order (.ci/deps.ts LAYERS)`);
  }
  const upward = edges
    .filter(({ from, to }) => {
      const a = rank.get(layerOf(from) ?? "");
      const b = rank.get(layerOf(to) ?? "");
      return a !== undefined && b !== undefined && b > a;
    })
    .map(({ from, to }) => `${from} -> ${to}: ${layerOf(from)} imports ${layerOf(to)}, above it`);
  found.push(...upward.sort());
  const entryOnly = edges
    .filter(({ from, to }) => ENTRY_ONLY.includes(to) && layerOf(from) !== "entry")
    .map(({ from, to }) => `${from} -> ${to}: only entry points import ${to}`);
  found.push(...entryOnly.sort());
  for (const circle of fileCircles(edges)) found.push(`import circle: ${circle.join(" -> ")}`);
  return found;
}

/** The import circles between files: one closed path per strongly connected group. */
export function fileCircles(edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) {
    if (!next.has(from)) next.set(from, []);
    next.get(from)!.push(to);
  }
  // Tarjan's strongly connected components, iterative so a deep graph cannot exhaust the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  let counter = 0;
  for (const root of [...next.keys()].sort()) {
    if (index.has(root)) continue;
    const work: { node: string; child: number }[] = [{ node: root, child: 0 }];
    index.set(root, counter);
    low.set(root, counter++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work.at(-1)!;
      const children = next.get(frame.node) ?? [];
      if (frame.child < children.length) {
        const child = children[frame.child++]!;
        if (!index.has(child)) {
          index.set(child, counter);
          low.set(child, counter++);
          stack.push(child);
          onStack.add(child);
          work.push({ node: child, child: 0 });
        } else if (onStack.has(child)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(child)!));
        }
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) === index.get(frame.node)) {
        const group: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          group.push(member);
        } while (member !== frame.node);
        const selfLoop = (next.get(frame.node) ?? []).includes(frame.node);
        if (group.length > 1 || selfLoop) groups.push(group);
      }
    }
  }
  return groups.map((group) => _closedPath(group, next));
}

// A path through a strongly connected group back to its start, for the message.
function _closedPath(group: string[], next: Map<string, string[]>): string[] {
  const members = new Set(group);
  const start = [...group].sort()[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const child of next.get(node) ?? []) {
      if (!members.has(child)) continue;
      if (child === start) {
        const path = [start];
        for (let at = node; at !== start; at = previous.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!previous.has(child)) {
        previous.set(child, node);
        queue.push(child);
      }
    }
  }
  return [start, start];
}

interface _DenoInfo {
  modules: {
    specifier: string;
    dependencies?: { code?: { specifier: string }; type?: { specifier: string } }[];
  }[];
}

/** The imports between project files (vendored code left out), type-only imports included. */
export async function projectEdges(root: URL, entries: readonly string[]): Promise<Edge[]> {
  const seen = new Set<string>();
  const edges: Edge[] = [];
  const local = (specifier: string) =>
    specifier.startsWith(root.href) && !specifier.startsWith(new URL("vendor/", root).href)
      ? specifier.slice(root.href.length)
      : null;
  for (const entry of entries) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", entry],
      cwd: root,
      stdout: "piped",
      stderr: "inherit",
    }).output();
    if (!out.success) throw new Error(`deno info ${entry} failed`);
    const info: _DenoInfo = JSON.parse(new TextDecoder().decode(out.stdout));
    for (const module of info.modules) {
      const from = local(module.specifier);
      if (from === null) continue;
      for (const dependency of module.dependencies ?? []) {
        for (const target of [dependency.code?.specifier, dependency.type?.specifier]) {
          const to = target === undefined ? null : local(target);
          const key = `${from} ${to}`;
          if (to === null || seen.has(key)) continue;
          seen.add(key);
          edges.push({ from, to });
        }
      }
    }
  }
  return edges;
}

if (import.meta.main) {
  const root = new URL("../", import.meta.url);
  const edges = await projectEdges(root, ENTRY_POINTS);
  const found = violations(edges);
  for (const line of found) console.log(line);
  const files = new Set(edges.flatMap(({ from, to }) => [from, to])).size;
  console.log(
    found.length === 0
      ? `deps: ok (${files} files, ${edges.length} imports, layers ${LAYERS.join(" < ")})`
      : `deps: ${found.length} violation(s) of the dependency rule (docs/architecture.md)`,
  );
  Deno.exit(found.length === 0 ? 0 : 1);
}
