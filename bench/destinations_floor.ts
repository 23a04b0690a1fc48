/**
 * The floor of `bench:destinations`: the simplest delivery there is, in a process of its own. A
 * bare HTTP server takes an event (`POST /event`, a profile id), notes it with its time, and a
 * timer every `POLL_MS` (the service's DESTINATION_POLL_MS) POSTs what is noted to the receiver,
 * unsigned, unbatched beyond one POST per tick, with nothing stored. Prints its port on stdout.
 */
const receiver = Deno.args[0]!;
const pollMs = Number(Deno.args[1] ?? 500);
let noted: { id: string; profile: string; at: string }[] = [];
let seq = 0;

const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
  const profile = await req.text();
  noted.push({ id: String(++seq), profile, at: new Date().toISOString() });
  return new Response(null, { status: 202 });
});
console.log(server.addr.port);

const tick = async () => {
  const batch = noted;
  noted = [];
  if (batch.length > 0) {
    const body = JSON.stringify({
      destination: "floor",
      deliveries: batch.map((n) => ({
        id: n.id,
        type: "segment.entered",
        segment: { id: "floor", name: "floor" },
        profile: { id: n.profile, identity: {} },
        at: n.at,
      })),
    });
    const res = await fetch(receiver, { method: "POST", body });
    await res.body?.cancel();
  }
  setTimeout(tick, pollMs);
};
setTimeout(tick, pollMs);
