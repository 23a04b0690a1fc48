/**
 * How an entry point reports what stopped its start: one JSON log line naming the variable or the
 * store at fault (never a stack trace), and exit status 1.
 *
 * @module
 */
import { type Config, ConfigError, loadConfig } from "./config.ts";
import { StoreOpenError } from "./errors.ts";
import { log } from "./log.ts";

/** The log fields that name a start-up failure's cause. */
export function startFailureFields(err: unknown): Record<string, unknown> {
  const named = err instanceof ConfigError
    ? { variables: err.variables }
    : err instanceof StoreOpenError
    ? { store: err.store, variable: err.variable }
    : {};
  return { ...named, error: err instanceof Error ? err.message : String(err) };
}

/** Logs "start-up failed" with {@linkcode startFailureFields} and ends the process (status 1). */
export function failStart(err: unknown): never {
  log("error", "start-up failed", startFailureFields(err));
  Deno.exit(1);
}

/** The config from `env`, or the start-up failure line and exit status 1. */
export function loadConfigOrFail(env: Record<string, string | undefined>): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    return failStart(err);
  }
}
