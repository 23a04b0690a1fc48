/**
 * matchesRegex patterns: only the subset of regular expressions that compiles in JavaScript and
 * means the same in Postgres is accepted, and only patterns whose compilation PostgreSQL can
 * afford (see {@linkcode regexProblem} for the cost rule).
 *
 * @module
 */
import { MAX_REGEX_COST, MAX_REGEX_ITEMS, MAX_REGEX_LENGTH } from "./vocabulary.ts";

/**
 * A piece of a pattern as PostgreSQL's regex compiler sees it. Its NFA gets a copy of a piece
 * for each bounded repetition (`size` weighs the items then: each item by its arcs, see
 * _escapeWeight and _classEnd), and an empty arc wherever the
 * piece may match nothing (`x?`, `x*`, `x{0,n}`, an empty alternative). Removing the empty arcs
 * gives each state an arc to every arc it reached through them: that is the cost counted, and a
 * run of k optional items, where each state reaches every later item, costs k²/2.
 * `enter` is the weight of the arcs reached from the piece's entry through empty arcs, `exit`
 * the number of its states that reach its exit through empty arcs, `cost` the arcs added inside.
 */
interface _Piece {
  size: number;
  nullable: boolean;
  enter: number;
  exit: number;
  cost: number;
}

const _NOTHING: _Piece = { size: 0, nullable: true, enter: 0, exit: 0, cost: 0 };

function _atom(weight: number): _Piece {
  return { size: weight, nullable: false, enter: weight, exit: 0, cost: 0 };
}

/** `a` then `b`: every state that reaches a's exit through empty arcs gains b's entry arcs. */
function _then(a: _Piece, b: _Piece): _Piece {
  return {
    size: a.size + b.size,
    nullable: a.nullable && b.nullable,
    enter: a.nullable ? a.enter + b.enter : a.enter,
    exit: b.nullable ? a.exit + b.exit : b.exit,
    cost: a.cost + b.cost + a.exit * b.enter,
  };
}

/** Alternatives, sharing their entry and exit. */
function _either(branches: _Piece[]): _Piece {
  const sum = (f: (p: _Piece) => number) => branches.reduce((n, p) => n + f(p), 0);
  const nullable = branches.some((p) => p.nullable);
  return {
    size: sum((p) => p.size),
    nullable,
    enter: sum((p) => p.enter),
    // An empty alternative is an empty arc from the entry to the exit.
    exit: sum((p) => p.exit) + (nullable ? 1 : 0),
    cost: sum((p) => p.cost),
  };
}

/** `count` copies of `x` one after the other. */
function _copies(x: _Piece, count: number): _Piece {
  let out = _NOTHING;
  for (let i = 0; i < count; i++) out = _then(out, x);
  return out;
}

/**
 * `x{low,high}` (high null: unbounded) as PostgreSQL builds it: the optional copies nested at
 * the front, ((x|)x|)x, whose entry reaches each of their entries through empty arcs, then the
 * required ones; an unbounded tail is a loop.
 */
function _repeat(x: _Piece, low: number, high: number | null): _Piece {
  const optional = high === null ? 0 : high - low;
  let front = _NOTHING;
  if (optional > 0) {
    const chained = _copies(x, optional);
    front = {
      size: chained.size,
      nullable: true,
      enter: x.enter * optional + (x.nullable ? chained.enter : 0),
      exit: chained.exit + 1,
      cost: chained.cost + x.enter * optional,
    };
  }
  let out = _then(front, _copies(x, low));
  if (high === null) {
    // The loop: its state reaches x's entry and exit, and x's exit states reach both.
    const loop: _Piece = {
      size: x.size,
      nullable: true,
      enter: x.enter,
      exit: x.exit + 1,
      cost: x.cost + (x.exit + 1) * x.enter,
    };
    out = _then(out, loop);
  }
  return out;
}

// The weight of a class escape: roughly the arcs PostgreSQL gives it (one per color: \\w
// spans letters, digits and _ of every script).
function _escapeWeight(escaped: string): number {
  return "wW".includes(escaped) ? 8 : "dDsS".includes(escaped) ? 4 : 1;
}

interface _Frame {
  branches: _Piece[];
  sequence: _Piece;
  /** The last item, not yet in `sequence`: a quantifier may still apply to it. */
  last: _Piece | null;
  lookaround: boolean;
}

function _flush(frame: _Frame): void {
  if (frame.last) frame.sequence = _then(frame.sequence, frame.last);
  frame.last = null;
}

function _close(frame: _Frame): _Piece {
  _flush(frame);
  return frame.branches.length === 0
    ? frame.sequence
    : _either([...frame.branches, frame.sequence]);
}

/**
 * Checks a matchesRegex pattern: it must compile as a JavaScript RegExp AND mean the same in
 * Postgres (ARE), so only the common subset is accepted: no backreferences, named groups,
 * \b \B \x \u \p escapes, POSIX bracket classes, class escapes in ranges, quantified lookarounds,
 * repetition counts over 255. And PostgreSQL must be able to afford compiling it (a pattern
 * it found too complex failed every read of the segment): at most MAX_REGEX_ITEMS items once
 * bounded repetitions are copied out (a character or `.` weighs 1, \d \s 4, \w 8, a class 2
 * plus 2 per member), and at most MAX_REGEX_COST arcs added for empty ones, where a run of k
 * items that may match nothing (`(.?){k}`, `(a*){k}`, `x?y?z?...`) adds about k²/2 (see
 * _Piece). docs/conditions.md states the rule.
 */
export function regexProblem(pattern: string): string | null {
  const scanned = _scan(pattern);
  if (typeof scanned === "string") return scanned;
  // Written as "not within" so that a figure grown past any number (NaN) is refused too.
  if (!(scanned.size <= MAX_REGEX_ITEMS)) {
    return `is too complex (its repetitions expand past ${MAX_REGEX_ITEMS} items, a class ` +
      "weighing more than one character; see docs/conditions.md)";
  }
  if (!(scanned.cost <= MAX_REGEX_COST)) {
    return `is too costly for the database to compile (cost ${scanned.cost}, at most ` +
      `${MAX_REGEX_COST}: runs of optional items such as (.?){n}, (a*){n} or x?y?z?... cost ` +
      "about the square of their length, see docs/conditions.md)";
  }
  return null;
}

/** The cost rule's figures for a pattern of the accepted subset (null for any other). */
export function regexCost(pattern: string): { items: number; cost: number } | null {
  const scanned = _scan(pattern);
  return typeof scanned === "string" ? null : { items: scanned.size, cost: scanned.cost };
}

/** Reads a pattern of the accepted subset into its piece, or says why it is not one. */
function _scan(pattern: string): _Piece | string {
  if (pattern.length > MAX_REGEX_LENGTH) return `must be at most ${MAX_REGEX_LENGTH} characters`;
  try {
    new RegExp(pattern);
  } catch {
    return "is not a valid regular expression";
  }
  const fresh = (lookaround: boolean): _Frame => ({
    branches: [],
    sequence: _NOTHING,
    last: null,
    lookaround,
  });
  const stack = [fresh(false)];
  let previous: "none" | "atom" | "lookaround" | "quantified" | "anchor" = "none";
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    const top = stack[stack.length - 1]!;
    if (c === "\\") {
      const escaped = pattern[i + 1] ?? "";
      if (/[A-Za-z0-9]/.test(escaped) && !"dDsSwWnrtfv".includes(escaped)) {
        return `uses the unsupported escape \\${escaped}`;
      }
      i += 2;
      _flush(top);
      top.last = _atom(_escapeWeight(escaped));
      previous = "atom";
    } else if (c === "[") {
      const end = _classEnd(pattern, i);
      if (typeof end === "string") return end;
      _flush(top);
      top.last = _atom(end.weight);
      i = end.end;
      previous = "atom";
    } else if (c === "(") {
      let lookaround = false;
      if (pattern[i + 1] === "?") {
        const kind = pattern.slice(i + 2, i + 4);
        if (kind.startsWith(":")) i += 3;
        else if (kind.startsWith("=") || kind.startsWith("!")) [lookaround, i] = [true, i + 3];
        else if (kind === "<=" || kind === "<!") [lookaround, i] = [true, i + 4];
        else {return "uses an unsupported group: only (...), (?:...), (?=...), (?!...), (?<=...) and (?<!...) are allowed";}
      } else {
        i += 1;
      }
      _flush(top);
      stack.push(fresh(lookaround));
      previous = "none";
    } else if (c === ")") {
      const frame = stack.pop()!;
      const group = _close(frame);
      // A lookaround is compiled as its own automaton and matches no characters here.
      stack[stack.length - 1]!.last = frame.lookaround
        ? { ...group, nullable: false, enter: 1, exit: 0 }
        : group;
      previous = frame.lookaround ? "lookaround" : "atom";
      i += 1;
    } else if (c === "*" || c === "+" || c === "?" || c === "{") {
      let low = c === "+" ? 1 : 0;
      let high: number | null = c === "?" ? 1 : null;
      if (c === "{") {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i));
        if (!m) {
          return "has a literal { that must be escaped as \\{";
        }
        low = Number(m[1]);
        high = m[3] ? Number(m[3]) : m[2] !== undefined ? null : low;
        if (low > 255 || (high !== null && high > 255)) {
          return "has a repetition count over 255";
        }
        i += m[0].length;
      } else {
        i += 1;
      }
      if (previous !== "atom" || !top.last) {
        return "has a quantifier that does not follow a character, class or group";
      }
      if (pattern[i] === "?") {
        i += 1;
      }
      top.last = _repeat(top.last, low, high);
      previous = "quantified";
    } else if (c === "^" || c === "$") {
      // An anchor is a constraint arc, not an empty one.
      _flush(top);
      top.last = { ..._atom(1), size: 0 };
      previous = "anchor";
      i += 1;
    } else if (c === "|") {
      _flush(top);
      top.branches.push(top.sequence);
      top.sequence = _NOTHING;
      previous = "none";
      i += 1;
    } else {
      _flush(top);
      top.last = _atom(1);
      previous = "atom";
      i += 1;
    }
  }
  return _close(stack[0]!);
}

/**
 * The index after the class starting at `start` and its weight (one more than its members,
 * one more again when negated), or a problem.
 */
function _classEnd(pattern: string, start: number): { end: number; weight: number } | string {
  let j = start + 1;
  let weight = 2;
  if (pattern[j] === "^") [j, weight] = [j + 1, 4];
  if (pattern[j] === "]") return "has a class starting with ] (escape it as \\])";
  let previous: "none" | "char" | "class" | "range" = "none";
  // One class item at k: its kind and where it ends, or a problem.
  const item = (k: number): { kind: "char" | "class"; end: number } | string => {
    const c = pattern[k] ?? "";
    if (c === "[" && ":.=".includes(pattern[k + 1] ?? "-")) {
      return "uses a POSIX bracket expression ([:name:], [.x.] or [=x=]), which is not supported";
    }
    if (c !== "\\") return { kind: "char", end: k + 1 };
    const escaped = pattern[k + 1] ?? "";
    if (!/[A-Za-z0-9]/.test(escaped)) return { kind: "char", end: k + 2 };
    if ("dDsSwW".includes(escaped)) return { kind: "class", end: k + 2 };
    if ("nrtfv".includes(escaped)) return { kind: "char", end: k + 2 };
    return `uses the unsupported escape \\${escaped}`;
  };
  while (j < pattern.length && pattern[j] !== "]") {
    if (pattern[j] === "-" && previous !== "none" && pattern[j + 1] !== "]") {
      const next = item(j + 1);
      if (typeof next === "string") return next;
      if (previous !== "char" || next.kind !== "char") {
        return "has a class range that does not join two single characters (put a literal - first or last)";
      }
      [j, previous] = [next.end, "range"];
      continue;
    }
    const current = item(j);
    if (typeof current === "string") return current;
    weight += current.kind === "class" ? _escapeWeight(pattern[j + 1]!) : 2;
    [j, previous] = [current.end, current.kind];
  }
  return { end: j + 1, weight };
}
