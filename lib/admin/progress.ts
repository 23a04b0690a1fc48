/**
 * Progress of a long input on stderr: objects (NDJSON lines) read so far and their rate, counted
 * as the bytes pass through, whatever command consumes them.
 *
 * @module
 */

/** Where and how often progress is reported. */
export interface ProgressOptions {
  /** Writes one report (the caller's stderr). */
  write(text: string): void;
  /** A terminal rewrites one line in place; anything else gets a line per report. */
  terminal: boolean;
  /** Milliseconds since some origin (`performance.now` by default). */
  now?: () => number;
  /** Least time between two reports; the last one is always written. */
  everyMs?: number;
}

const _NEWLINE = 0x0a;
const _SPACE = 0x20;

/** `stream` unchanged, reporting objects read and their rate as it is consumed. */
export function withProgress(
  stream: ReadableStream<Uint8Array>,
  options: ProgressOptions,
): ReadableStream<Uint8Array> {
  const now = options.now ?? (() => performance.now());
  const everyMs = options.everyMs ?? 1000;
  const started = now();
  let lastReport = started;
  let objects = 0;
  let bytes = 0;
  // Blank lines are no objects: only a line with something on it counts.
  let lineHasContent = false;
  const report = (final: boolean) => {
    const seconds = Math.max((now() - started) / 1000, 0.001);
    const total = objects + (final && lineHasContent ? 1 : 0);
    const line = `${total} objects read (${Math.round(total / seconds)}/s, ${
      (bytes / 1e6).toFixed(1)
    } MB)${final ? ", done" : ""}`;
    if (options.terminal) options.write(`\r${line}\x1b[K${final ? "\n" : ""}`);
    else options.write(`${line}\n`);
  };
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        bytes += chunk.byteLength;
        for (let i = 0; i < chunk.byteLength; i++) {
          const byte = chunk[i]!;
          if (byte === _NEWLINE) {
            if (lineHasContent) objects++;
            lineHasContent = false;
          } else if (byte > _SPACE) lineHasContent = true;
        }
        controller.enqueue(chunk);
        if (now() - lastReport >= everyMs) {
          lastReport = now();
          report(false);
        }
      },
      flush() {
        report(true);
      },
    }),
  );
}
