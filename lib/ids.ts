const _ENCODING = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"; // Crockford's base32
const _TIME_CHARS = 10;
const _RANDOM_CHARS = 16;
const _POOL_BYTES = 4096;

/**
 * A source of monotonic ULIDs, as `ulid`'s `monotonicFactory()` makes them (within one
 * millisecond, the random part is incremented), at a fraction of the cost: the edge takes one
 * per event, and the package's draw of one `getRandomValues` per character and its encoding of
 * the time on every call cost ~7% of the edge's CPU.
 */
export function ulidSource(): () => string {
  let pool = new Uint8Array(0);
  let used = 0;
  let lastTime = -1;
  let time = "";
  let random = "";
  return function newUlid() {
    const now = Date.now();
    if (now > lastTime) {
      lastTime = now;
      time = _encodeTime(now);
      if (used + _RANDOM_CHARS > pool.length) {
        pool = crypto.getRandomValues(new Uint8Array(_POOL_BYTES));
        used = 0;
      }
      random = "";
      // 256 is a multiple of 32: the low five bits of a byte are uniform.
      for (let i = 0; i < _RANDOM_CHARS; i++) random += _ENCODING[pool[used++]! & 31];
    } else {
      // The clock did not move (or went back): the next id of the same millisecond.
      random = _increment(random);
    }
    return time + random;
  };
}

function _encodeTime(ms: number): string {
  let text = "";
  for (let i = 0; i < _TIME_CHARS; i++) {
    const digit = ms % 32;
    text = _ENCODING[digit] + text;
    ms = (ms - digit) / 32;
  }
  return text;
}

function _increment(text: string): string {
  for (let i = text.length - 1; i >= 0; i--) {
    const digit = _ENCODING.indexOf(text[i]!);
    if (digit < 31) {
      return text.slice(0, i) + _ENCODING[digit + 1] + "0".repeat(text.length - i - 1);
    }
  }
  throw new Error("ULID random part overflowed within one millisecond");
}

/**
 * A UUID version 7 (RFC 9562): the time in milliseconds first, then random bits. Still a UUID to
 * whoever classifies identifiers, but ids made close in time sort close together, so a table's
 * primary key and the indexes holding it as a reference grow at one end instead of touching a
 * random page of a large index for every row.
 */
export function uuidV7(now = Date.now()): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  for (let i = 5; i >= 0; i--) {
    bytes[i] = now % 256;
    now = Math.floor(now / 256);
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${
    hex.slice(20)
  }`;
}
