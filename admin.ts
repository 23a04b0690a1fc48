import { runAdmin } from "./lib/admin.ts";

Deno.exit(await runAdmin(Deno.args, Deno.env.toObject()));
