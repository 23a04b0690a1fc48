/** `deno task admin pixel`, run as a subprocess; the printed custom pixel run on Shopify's globals. */
import assert from "node:assert/strict";
import { parseShopifyPixelEvent } from "../../../lib/ingest/shopify_pixel_spec.ts";
import { json, runCli, withStores } from "./cli_support.ts";

const fixture = JSON.parse(
  await Deno.readTextFile(new URL("../../fixtures/shopify/pixel_events.json", import.meta.url)),
) as { samples: { event: Record<string, unknown> }[] };

Deno.test("cli: pixel prints the custom pixel for the brand's shop; run on a custom pixel's globals, it posts the standard events", async () => {
  await withStores(async (env) => {
    const brand = json(
      await runCli(["brand", "create", "--name", "Acme", "--shop", "acme.myshopify.com"], env),
    );
    const printed = json(
      await runCli(
        ["pixel", "--brand", String(brand.id), "--url", "https://cdp.example.com/"],
        env,
      ),
    );
    assert.equal(printed.shop, "acme.myshopify.com");
    assert.equal(
      printed.endpoint,
      "https://cdp.example.com/cdp/ingest/shopify?shop=acme.myshopify.com",
    );
    const code = String(printed.code);
    assert.ok(!/^export /m.test(code), "a custom pixel is a script");

    // A custom pixel's globals: analytics, browser, init (no customerPrivacy, no api here).
    const subscribers: ((event: unknown) => void)[] = [];
    const sent: { url: string; init: RequestInit }[] = [];
    const run = new Function("analytics", "browser", "init", "fetch", code);
    run(
      { subscribe: (_name: string, cb: (event: unknown) => void) => subscribers.push(cb) },
      { sendBeacon: () => Promise.resolve(true) },
      {
        data: { shop: { myshopifyDomain: "acme.myshopify.com" } },
        customerPrivacy: { analyticsProcessingAllowed: true },
      },
      (url: string, init: RequestInit) => {
        sent.push({ url, init });
        return Promise.resolve(new Response(null, { status: 202 }));
      },
    );
    assert.equal(subscribers.length, 1);
    const events = fixture.samples.map((s) => s.event);
    const first = events.find((e) => e.name === "page_viewed")!;
    const last = events.find((e) => e.name === "checkout_completed")!;
    for (const event of [first, last]) subscribers[0]!(event);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.url, printed.endpoint);
    assert.equal(sent[0]!.init.keepalive, true);
    const body = JSON.parse(String(sent[0]!.init.body));
    assert.deepEqual(body.events.map((e: { id: string }) => e.id), [first.id, last.id]);
    for (const event of body.events) assert.ok(parseShopifyPixelEvent(event).ok);

    const noUrl = await runCli(["pixel", "--brand", String(brand.id)], env);
    assert.equal(noUrl.code, 1);
    assert.match(noUrl.stderr, /--url/);
    const badUrl = await runCli(["pixel", "--brand", String(brand.id), "--url", "ftp://x"], env);
    assert.equal(badUrl.code, 2);
  });
});
