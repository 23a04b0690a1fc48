/**
 * The service's log: one JSON object a line, on stdout for `info`, stderr for `warn` and
 * `error`, so a platform's log drain can parse and filter every line.
 *
 * @module
 */

/** A log line's level. */
export type LogLevel = "info" | "warn" | "error";

/** Writes one JSON log line: `{level, message, ...fields}`. */
export function log(level: LogLevel, message: string, fields: Record<string, unknown> = {}): void {
  const line = JSON.stringify({ level, message, ...fields });
  if (level === "info") console.log(line);
  else console.error(line);
}
