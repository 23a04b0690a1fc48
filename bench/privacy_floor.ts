/**
 * The erase benchmark's floor in a process of its own: the plain `DELETE`s a DBA would run to
 * remove one person (events, sessions, profile) by profile id, one transaction. bench/privacy_load.ts
 * spawns it beside its own figure.
 *
 *   deno run -A bench/privacy_floor.ts
 *
 * Environment: FLOOR_DATABASE_URL (the scratch database), FLOOR_SCOPE, FLOOR_PROFILE. Prints one
 * JSON line on stdout: `{"seconds", "events"}`.
 *
 * @module
 */
import postgres from "postgres";

const sql = postgres(Deno.env.get("FLOOR_DATABASE_URL")!, { max: 1, onnotice: () => {} });
const scope = Deno.env.get("FLOOR_SCOPE")!;
const profile = Deno.env.get("FLOOR_PROFILE")!;
try {
  await sql`select 1`;
  const started = performance.now();
  const events = await sql.begin(async (tx) => {
    const deleted = await tx`delete from events where scope = ${scope} and profile_id = ${profile}`;
    await tx`delete from sessions where scope = ${scope} and profile_id = ${profile}`;
    await tx`delete from profiles where scope = ${scope} and item_id = ${profile}`;
    return deleted.count;
  });
  const seconds = (performance.now() - started) / 1000;
  console.log(JSON.stringify({ seconds, events }));
} finally {
  await sql.end();
}
