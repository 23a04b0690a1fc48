/**
 * matchesRegex patterns: only the subset of regular expressions that compiles in JavaScript and
 * means the same in Postgres is accepted.
 *
 * @module
 */
import { MAX_REGEX_LENGTH } from "./vocabulary.ts";

/**
 * Checks a matchesRegex pattern: it must compile as a JavaScript RegExp AND mean the same in
 * Postgres (ARE), so only the common subset is accepted: no backreferences, named groups,
 * \b \B \x \u \p escapes, POSIX bracket classes, class escapes in ranges, quantified lookarounds,
 * repetition counts over 255 or expansions Postgres would find too complex.
 */
export function regexProblem(pattern: string): string | null {
  if (pattern.length > MAX_REGEX_LENGTH) return `must be at most ${MAX_REGEX_LENGTH} characters`;
  try {
    new RegExp(pattern);
  } catch {
    return "is not a valid regular expression";
  }
  const stack = [{ weight: 0, lookaround: false }];
  let last = 0;
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
      [top.weight, last, previous] = [top.weight + 1, 1, "atom"];
    } else if (c === "[") {
      const end = _classEnd(pattern, i);
      if (typeof end === "string") return end;
      i = end;
      [top.weight, last, previous] = [top.weight + 1, 1, "atom"];
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
      stack.push({ weight: 0, lookaround });
      previous = "none";
    } else if (c === ")") {
      const group = stack.pop()!;
      stack[stack.length - 1]!.weight += group.weight;
      [last, previous] = [group.weight, group.lookaround ? "lookaround" : "atom"];
      i += 1;
    } else if (c === "*" || c === "+" || c === "?" || c === "{") {
      let copies = 1;
      if (c === "{") {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i));
        if (!m) {
          return "has a literal { that must be escaped as \\{";
        }
        const low = Number(m[1]);
        const high = m[3] ? Number(m[3]) : m[2] !== undefined ? low + 1 : low;
        if (low > 255 || (m[3] && Number(m[3]) > 255)) {
          return "has a repetition count over 255";
        }
        copies = Math.max(high, 1);
        i += m[0].length;
      } else {
        i += 1;
      }
      if (
        previous !== "atom"
      ) {
        return "has a quantifier that does not follow a character, class or group";
      }
      if (pattern[i] === "?") {
        i += 1;
      }
      top.weight += last * (copies - 1);
      previous = "quantified";
    } else if (c === "^" || c === "$") {
      previous = "anchor";
      i += 1;
    } else if (c === "|") {
      previous = "none";
      i += 1;
    } else {
      [top.weight, last, previous] = [top.weight + 1, 1, "atom"];
      i += 1;
    }
  }
  if (stack[0]!.weight > 10_000) return "is too complex (its repetitions expand past 10000 items)";
  return null;
}

/** The index after the class starting at `start`, or a problem. */
function _classEnd(pattern: string, start: number): number | string {
  let j = start + 1;
  if (pattern[j] === "^") j += 1;
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
    [j, previous] = [current.end, current.kind];
  }
  return j + 1;
}
