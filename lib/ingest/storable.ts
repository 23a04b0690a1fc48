/**
 * What storage would refuse or alter in an ingested value: NULs and unpaired surrogates
 * (PostgreSQL's text and jsonb refuse both) and numbers a double does not hold exactly. The edge
 * ({@link ./edge.ts}) rejects such events up front instead of failing or changing them later.
 *
 * @module
 */
/** A number whose text, read as a double, is not what storage would keep. */
class _InexactNumber {
  constructor(readonly written: string, readonly read: number) {}
}

/**
 * Parses JSON text as JSON.parse does, except that each number its double does not hold exactly
 * (the stored value, the double as JSON writes it, differs from the text) becomes an
 * {@linkcode _InexactNumber}, for {@linkcode unstorableValues} to report.
 */
export function parseJsonExact(text: string): unknown {
  return JSON.parse(text, function (_key, value, context?: { source?: string }) {
    if (typeof value !== "number" || context?.source === undefined) return value;
    const source = context.source;
    return _decimal(source) === _decimal(JSON.stringify(value))
      ? value
      : new _InexactNumber(source, value);
  });
}

// A JSON number's decimal value as `<sign><digits>e<exponent>`, digits without leading or
// trailing zeros, so equal values compare equal ("1.50" and "15e-1"); non-finite is "null".
function _decimal(text: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!match) return text;
  const [, sign, whole, fraction = "", exponent = "0"] = match;
  const digits = (whole + fraction).replace(/^0+/, "");
  if (digits === "") return "0";
  const trimmed = digits.replace(/0+$/, "");
  return `${sign}${trimmed}e${Number(exponent) - fraction.length + digits.length - trimmed.length}`;
}

/** How many storage problems one event reports at most. */
const _MAX_UNSTORABLE = 20;

/**
 * Where in `value` (JSON paths under `path`) storage would refuse or alter what was sent: a NUL
 * (U+0000) or an unpaired surrogate in a string or key (PostgreSQL's text and jsonb refuse
 * both), and a number read by {@linkcode parseJsonExact} that is not stored exactly. At most
 * 20 problems.
 */
export function unstorableValues(
  value: unknown,
  path: (string | number)[],
): { path: string; message: string }[] {
  const found: { path: string; message: string }[] = [];
  _walkUnstorable(value, path, found);
  return found;
}

function _walkUnstorable(
  node: unknown,
  path: (string | number)[],
  found: { path: string; message: string }[],
): void {
  if (found.length >= _MAX_UNSTORABLE) return;
  if (typeof node === "string") {
    const problem = _stringProblem(node);
    if (problem) found.push({ path: jsonPath(path), message: problem });
    return;
  }
  if (node instanceof _InexactNumber) {
    found.push({
      path: jsonPath(path),
      message: Number.isFinite(node.read)
        ? `the number ${node.written} cannot be stored exactly (it would be stored as ${
          JSON.stringify(node.read)
        }); send it as a string`
        : `the number ${node.written} is out of range; send it as a string`,
    });
    return;
  }
  if (typeof node !== "object" || node === null) return;
  // The nesting was bounded by the scope-binding walk before this runs.
  if (Array.isArray(node)) {
    node.forEach((child, i) => _walkUnstorable(child, [...path, i], found));
    return;
  }
  for (const [key, child] of Object.entries(node)) {
    const problem = _stringProblem(key);
    if (problem && found.length < _MAX_UNSTORABLE) {
      found.push({ path: jsonPath([...path, key]), message: `key ${problem}` });
    }
    _walkUnstorable(child, [...path, key], found);
  }
}

function _stringProblem(text: string): string | null {
  if (text.includes("\0")) return "contains NUL (U+0000), which cannot be stored";
  if (!text.isWellFormed()) {
    return "contains an unpaired UTF-16 surrogate (not a Unicode character), which cannot be stored";
  }
  return null;
}

/** A JSON path (`$.events[0].properties`) for `path`. */
export function jsonPath(path: PropertyKey[]): string {
  return "$" +
    path.map((p) =>
      typeof p === "number"
        ? `[${p}]`
        : /^[A-Za-z_$][\w$]*$/.test(String(p))
        ? `.${String(p)}`
        : `[${JSON.stringify(String(p))}]`
    ).join("");
}
