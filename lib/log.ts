/**
 * The service's log: one JSON object a line, on stdout for `debug` and `info`, stderr for `warn`
 * and `error`, so a platform's log drain can parse and filter every line. `LOG_LEVEL` sets the
 * least severe level written.
 *
 * @module
 */

/** A log line's level, least severe first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const _RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

// The process's threshold: set once by an entry point from its config, before it logs. The log
// is process-wide (stdout and stderr are), so its threshold is too.
let _threshold = _RANK.info;

/** Sets the least severe level written (`LOG_LEVEL`); entry points call it once at start. */
export function setLogLevel(level: LogLevel): void {
  _threshold = _RANK[level];
}

/** Writes one JSON log line: `{level, message, ...fields}`, when `level` is at the threshold. */
export function log(level: LogLevel, message: string, fields: Record<string, unknown> = {}): void {
  if (_RANK[level] < _threshold) return;
  const line = JSON.stringify({ level, message, ...fields });
  if (level === "info" || level === "debug") console.log(line);
  else console.error(line);
}
