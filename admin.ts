/**
 * `deno task admin`: the operator CLI's process entry (lib/admin/).
 *
 * @module
 */
import { runAdmin } from "./lib/admin/cli.ts";

Deno.exit(await runAdmin(Deno.args, Deno.env.toObject()));
