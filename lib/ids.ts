/**
 * Identifiers: monotonic ULIDs and version 7 UUIDs.
 *
 * @module
 */
const _ENCODING = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"; // Crockford's base32
const _TIME_CHARS = 10;
const _RANDOM_CHARS = 16;
const _POOL_BYTES = 4096;

/**
 * A source of monotonic ULIDs, as `ulid`'s `monotonicFactory()` makes them (within one
 * millisecond, the random part is incremented), at a fraction of the cost: the edge takes one
 * per event, and the package's draw of one `getRandomValues` per character and its encoding of
 * the time on every call are costly on the hot path.
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
  const time = now.toString(16).padStart(12, "0");
  // A version 4 UUID has the variant bits version 7 needs and random bits everywhere else.
  const random = crypto.randomUUID();
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${random.slice(15)}`;
}
