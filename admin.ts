/**
 * `deno task admin`: the operator CLI's process entry (lib/admin.ts).
 *
 * @module
 */
import { runAdmin } from "./lib/admin.ts";

Deno.exit(await runAdmin(Deno.args, Deno.env.toObject()));
