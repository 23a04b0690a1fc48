/**
 * The operator API (`POST /admin/commands/{name}`), mounted only when ADMIN_TOKEN is set: runs
 * any command of the CLI's registry in the service, with the command's own `parse` and `run`,
 * and answers the JSON the CLI would print (docs/operations.md#operator-api).
 *
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import {
  type Commands,
  commandSlug,
  type CommandStores,
  UsageError,
} from "../lib/admin/command.ts";
import { ADMIN_ARGS_HEADER } from "../lib/admin/remote.ts";
import { DomainError } from "../lib/errors.ts";
import { adminAuth } from "../lib/http/admin_auth.ts";
import type { AppDeps, AppEnv } from "../lib/http/app_env.ts";
import { bodyLimit } from "../lib/http/body_limit.ts";
import { clientAddress } from "../lib/http/client_address.ts";
import { HttpError } from "../lib/http/errors.ts";
import { errorResponses, jsonResponse, newRouter } from "../lib/http/openapi.ts";
import { databaseFailure } from "../lib/store/db.ts";

const _ARGS_EXAMPLE = ["--brand", "01M86TDT9CSKW28VQJZ3VT7SDR"];

/** The operator API over `commands`, run on `stores`; every request needs the bearer `token`. */
export function adminRoutes(
  deps: AppDeps,
  options: { commands: Commands; stores: CommandStores; token: string },
) {
  const bySlug = new Map(
    Object.entries(options.commands).map(([name, command]) => [commandSlug(name), {
      name,
      command,
    }]),
  );
  const run = createRoute({
    operationId: "runAdminCommand",
    method: "post",
    path: "/admin/commands/{name}",
    tags: ["Admin"],
    summary: "Run an operator command (as `deno task admin`)",
    description: "Runs the CLI command `name` (its words joined by -) with the arguments a shell " +
      "would pass after it, and answers the JSON object the CLI prints. Arguments come as JSON " +
      '`{"args": [...]}`; a command reading a FILE takes the file as an ' +
      "`application/octet-stream` body instead, streamed, with the arguments in " +
      "`X-Admin-Args` (URL-encoded JSON array). A bad command line is 400 `usage_error` (the " +
      "CLI's exit 2), a failure of the command 404, 409 or 422 `command_failed` (exit 1).",
    security: [{ adminToken: [] }],
    request: {
      params: z.object({
        name: z.enum([...bySlug.keys()] as [string, ...string[]]).openapi({
          param: { name: "name", in: "path" },
          example: "key-list",
        }),
      }),
      headers: z.object({
        [ADMIN_ARGS_HEADER]: z.string().max(8192).optional().openapi({
          description: "With a FILE body: the arguments, as a URL-encoded JSON array",
          example: encodeURIComponent(JSON.stringify([..._ARGS_EXAMPLE, "-"])),
        }),
      }),
      body: {
        required: false,
        content: {
          "application/json": {
            schema: z.object({ args: z.array(z.string().max(10_000)).max(100).optional() })
              .strict(),
            example: { args: _ARGS_EXAMPLE },
          },
          "application/octet-stream": {
            schema: z.string().openapi({ format: "binary" }),
            example: '{"external_id":"1001","number":"#1001","state":"complete",...}\n',
          },
        },
      },
    },
    responses: {
      200: jsonResponse(z.record(z.string(), z.unknown()), "What the command prints", {
        brand: "01M86TDT9CSKW28VQJZ3VT7SDR",
        keys: [{
          id: "key_01M86TDYHNQ30NXFE6P2TJRHPN",
          name: "backend",
          prefix: "svc_esDghS",
          created_at: "2026-11-24T13:02:56.659Z",
          last_used_at: null,
          expires_at: null,
          revoked_at: null,
        }],
      }),
      ...errorResponses(400, 401, 404, 405, 409, 413, 415, 422, 429, 503),
    },
  });

  const router = newRouter();
  // The token is checked first: only failures are counted, per client address.
  router.use(
    "/admin/*",
    adminAuth({
      token: options.token,
      kv: deps.kv,
      now: deps.now,
      failuresPerMinute: deps.config.adminRateLimitPerMinute,
      source: (c) => clientAddress(c, deps.config.trustProxy),
    }),
  );
  // A FILE body is streamed into the command, of any size; arguments in JSON are bounded.
  const jsonLimit = bodyLimit({
    maxBytes: deps.config.maxBodyBytes,
    timeoutMs: deps.config.bodyReadTimeoutMs,
  });
  router.use("/admin/*", (c, next) => _isFileBody(c) ? next() : jsonLimit(c, next));

  return router.openapi(run, async (c) => {
    const { name, command } = bySlug.get(c.req.valid("param").name)!;
    const fileBody = _isFileBody(c) ? c.req.raw.body : null;
    let body = fileBody;
    try {
      const json = c.req.valid("json");
      const args = fileBody
        ? _headerArgs(c.req.valid("header")[ADMIN_ARGS_HEADER])
        : (typeof json === "object" ? json.args : undefined) ?? [];
      const input = command.parse(args);
      const file = command.input?.(input);
      if (file !== undefined && !fileBody) {
        throw new UsageError(
          `${name} reads ${file}: send it as an application/octet-stream body, the arguments ` +
            `in ${ADMIN_ARGS_HEADER}`,
        );
      }
      if (file === undefined && fileBody) throw new UsageError(`${name} reads no file`);
      const output = await command.run(options.stores, input, deps.config, {
        open() {
          if (!body) throw new DomainError("invalid_input", "the file was read already");
          const stream = body;
          body = null;
          return Promise.resolve(stream);
        },
      });
      return c.json(output as Record<string, unknown>, 200);
    } catch (err) {
      throw _commandFailure(err, name, command.usage);
    } finally {
      // A command that failed before reading its file leaves it unread: stop the upload.
      await body?.cancel().catch(() => {});
    }
  });
}

function _isFileBody(c: Context<AppEnv>): boolean {
  return c.req.raw.body !== null &&
    (c.req.header("content-type") ?? "").toLowerCase().startsWith("application/octet-stream");
}

function _headerArgs(header: string | undefined): string[] {
  if (header === undefined) return [];
  let args: unknown;
  try {
    args = JSON.parse(decodeURIComponent(header));
  } catch {
    throw new UsageError(`${ADMIN_ARGS_HEADER} is not a URL-encoded JSON array`);
  }
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === "string")) {
    throw new UsageError(`${ADMIN_ARGS_HEADER} must be a JSON array of strings`);
  }
  return args;
}

/**
 * What a command's failure answers: a usage error is 400 `usage_error`; domain, HTTP and
 * database errors keep their usual mapping; an `Error` a command threw with a message for the
 * operator is 422 `command_failed` with it (the CLI prints the same). Anything else (a
 * TypeError: a bug) stays an opaque 500.
 */
function _commandFailure(err: unknown, name: string, usage: string): unknown {
  if (err instanceof UsageError) {
    return new HttpError(400, "usage_error", `${err.message} (usage: ${name} ${usage})`.trim());
  }
  if (
    err instanceof DomainError || err instanceof HttpError || databaseFailure(err) !== null ||
    !(err instanceof Error) || err.constructor !== Error
  ) {
    return err;
  }
  return new HttpError(422, "command_failed", err.message, { cause: err });
}
