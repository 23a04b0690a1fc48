/**
 * The CLI's remote mode: with ADMIN_URL (and ADMIN_TOKEN) set, a command runs on that service
 * through its operator API (`POST /admin/commands/{name}`, routes/admin.ts) instead of on stores
 * of this machine; the FILE of a command that reads one is streamed as the request body.
 *
 * @module
 */
import { type CommandIo, commandSlug, UsageError } from "./command.ts";

/** The header carrying a command's arguments when the request body is its FILE. */
export const ADMIN_ARGS_HEADER = "x-admin-args";

/** Where the operator API is and the token it takes. */
export interface RemoteTarget {
  url: string;
  token: string | undefined;
}

/** One command line to run remotely: the command's name, its arguments, the FILE it reads. */
export interface RemoteCall {
  name: string;
  args: string[];
  file: string | undefined;
}

/** A failure the service reported; `usage` when it refused the command line (the CLI's exit 2). */
export class RemoteError extends Error {
  constructor(message: string, readonly usage: boolean) {
    super(message);
  }
}

/** Runs `call` on the service at `target` and returns the JSON it answered. */
export async function runRemote(
  target: RemoteTarget,
  call: RemoteCall,
  io: CommandIo,
): Promise<unknown> {
  if (target.token === undefined) {
    throw new UsageError("ADMIN_URL is set but ADMIN_TOKEN is not: the operator API needs it");
  }
  const headers = new Headers({ Authorization: `Bearer ${target.token}` });
  let body: BodyInit;
  if (call.file === undefined) {
    headers.set("Content-Type", "application/json");
    body = JSON.stringify({ args: call.args });
  } else {
    headers.set("Content-Type", "application/octet-stream");
    headers.set(ADMIN_ARGS_HEADER, encodeURIComponent(JSON.stringify(call.args)));
    body = await io.open(call.file);
  }
  const url = `${target.url}/admin/commands/${encodeURIComponent(commandSlug(call.name))}`;
  let res: Response;
  try {
    res = await fetch(url, { method: "POST", headers, body });
  } catch (err) {
    throw new Error(`cannot reach ADMIN_URL ${target.url}: ${(err as Error).message}`);
  }
  const text = await res.text();
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new Error(`${url} answered ${res.status} without JSON: ${text.slice(0, 200)}`);
  }
  if (res.ok) return answer;
  const { error, error_description: description } = answer as {
    error?: string;
    error_description?: string;
  };
  if (res.status === 404 && error === "not_found" && description?.startsWith("No route")) {
    throw new Error(`${target.url} has no operator API: is ADMIN_TOKEN set on the service?`);
  }
  throw new RemoteError(description ?? error ?? `status ${res.status}`, error === "usage_error");
}
