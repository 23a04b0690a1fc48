/** The client address behind TRUST_PROXY hops, and the pixel limit keyed by it. */
import assert from "node:assert/strict";
import { Hono } from "hono";
import { clientAddress } from "../../../lib/http/client_address.ts";
import { withContext } from "../../test_support.ts";

const PEER = { remoteAddr: { hostname: "10.0.0.1", port: 40000, transport: "tcp" } };

/** The address clientAddress reads for an X-Forwarded-For header, behind `hops` proxies. */
async function addressOf(hops: number, forwarded?: string): Promise<string> {
  const app = new Hono().get("/", (c) => c.text(clientAddress(c, hops)));
  const headers: Record<string, string> = forwarded === undefined
    ? {}
    : { "X-Forwarded-For": forwarded };
  return await (await app.request("/", { headers }, PEER)).text();
}

Deno.test("clientAddress: the entry TRUST_PROXY hops from the right, never the leftmost", async () => {
  assert.equal(await addressOf(0, "192.0.2.1, 203.0.113.7"), "10.0.0.1");
  assert.equal(await addressOf(1, "192.0.2.1, 203.0.113.7"), "203.0.113.7");
  assert.equal(await addressOf(1, "192.0.2.1,203.0.113.7 "), "203.0.113.7");
  assert.equal(await addressOf(2, "192.0.2.1, 203.0.113.7, 10.0.0.9"), "203.0.113.7");
  assert.equal(await addressOf(1, "2001:DB8::1"), "2001:db8::1");
  // Shorter than the proxy chain, or absent: the request did not come through it.
  assert.equal(await addressOf(2, "203.0.113.7"), "10.0.0.1");
  assert.equal(await addressOf(1), "10.0.0.1");
  assert.equal(await addressOf(1, " , "), "10.0.0.1");
  assert.equal((await addressOf(1, "x".repeat(500))).length, 100);
});

Deno.test("pixel limit behind one proxy: rotating the first entry gets no fresh allowance, a victim's is not spent", async () => {
  await withContext(async (ctx) => {
    const brand = await ctx.seedBrand();
    const shop = brand.scope!;
    const send = async (forwarded: string) => {
      const res = await ctx.app.request(`/cdp/ingest?shop=${shop}`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Origin: `https://${shop}`,
          "X-Forwarded-For": forwarded,
        },
        body: JSON.stringify({
          events: [{ eventType: "page_viewed", profileId: "anon_1", properties: { url: "x" } }],
        }),
      }, PEER);
      await res.body?.cancel();
      return res.status;
    };
    // The proxy appends the attacker's real address; the attacker picks what is left of it.
    for (let i = 0; i < 3; i++) assert.equal(await send(`192.0.2.${i}, 203.0.113.7`), 202);
    assert.equal(await send("192.0.2.99, 203.0.113.7"), 429);
    // Naming a victim on the left spends nothing of the victim's allowance.
    for (let i = 0; i < 3; i++) await send("198.51.100.2, 203.0.113.7");
    assert.equal(await send("198.51.100.2"), 202);
  }, { PIXEL_RATE_LIMIT_PER_MINUTE: "3", TRUST_PROXY: "1" });
});
