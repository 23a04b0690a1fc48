import assert from "node:assert/strict";
import {
  deviceCategory,
  parseUserAgent,
  sessionPropertiesOf,
} from "../../../lib/engine/session_context.ts";

// Real User-Agent strings, as those browsers send them.
const AGENTS = {
  chromeMac:
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) " +
    "Chrome/131.0.0.0 Safari/537.36",
  safariIphone:
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like " +
    "Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
  chromeIpad:
    "Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) " +
    "CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
  firefoxWindows:
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
  edgeWindows: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) " +
    "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.70",
  samsungPhone:
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) " +
    "SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
  chromeAndroidTablet:
    "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) " +
    "Chrome/131.0.0.0 Safari/537.36",
  headless: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) " +
    "HeadlessChrome/131.0.6778.33 Safari/537.36",
};

Deno.test("session context: browser, operating system and device category from real User-Agents", () => {
  const seen = Object.fromEntries(
    Object.entries(AGENTS).map(([name, agent]) => {
      const p = parseUserAgent(agent);
      return [name, [p.userAgentName, p.userAgentVersion, p.operatingSystemName, p.deviceCategory]];
    }),
  );
  assert.deepEqual(seen, {
    chromeMac: ["Chrome", "131.0.0.0", "macOS", "desktop"],
    safariIphone: ["Safari", "17.6", "iOS", "mobile"],
    chromeIpad: ["Chrome", "131.0.6778.73", "iOS", "tablet"],
    firefoxWindows: ["Firefox", "133.0", "Windows", "desktop"],
    edgeWindows: ["Edge", "131.0.2903.70", "Windows", "desktop"],
    samsungPhone: ["Samsung Internet", "26.0", "Android", "mobile"],
    chromeAndroidTablet: ["Chrome", "131.0.0.0", "Android", "tablet"],
    headless: ["Headless Chrome", "131.0.6778.33", "Linux", "desktop"],
  });
  assert.equal(parseUserAgent(AGENTS.chromeMac).userAgentNameAndVersion, "Chrome@@131.0.0.0");
  // An agent it does not know: a desktop, and nothing else claimed.
  assert.deepEqual(parseUserAgent("curl/8.5.0"), { deviceCategory: "desktop" });
  assert.equal(deviceCategory("Mozilla/5.0 (Linux; Android 14; Pixel 8) Mobile"), "mobile");
});

Deno.test("session context: landing page, referrer and UTM fields (campaign first, else the URL's query)", () => {
  const page = {
    url: "https://acme.example/sale?utm_source=news&utm_medium=email&utm_campaign=fall&x=1",
    referrer: "https://www.google.com/",
    title: "Sale",
  };
  assert.deepEqual(
    sessionPropertiesOf({
      context: { page, userAgent: AGENTS.safariIphone, locale: "en-US", ip: "203.0.113.9" },
    }),
    {
      landingPageURL: page.url,
      landingPagePath: "/sale",
      referringURL: "https://www.google.com/",
      utmSource: "news",
      utmMedium: "email",
      utmCampaign: "fall",
      userAgentName: "Safari",
      userAgentVersion: "17.6",
      userAgentNameAndVersion: "Safari@@17.6",
      operatingSystemName: "iOS",
      deviceCategory: "mobile",
      locale: "en-US",
    },
  );
  // analytics.js sends campaign (parsed from the page); it wins over the URL's query.
  const withCampaign = sessionPropertiesOf({
    context: { page: { ...page, path: "/sale" }, campaign: { name: "winter", source: "ads" } },
  })!;
  assert.equal(withCampaign.utmCampaign, "winter");
  assert.equal(withCampaign.utmSource, "ads");
  assert.equal(withCampaign.utmMedium, undefined);
  // page.search, when sent, is the query read.
  assert.equal(
    sessionPropertiesOf({
      context: { page: { url: "https://a.example/", search: "?utm_term=x" } },
    })!
      .utmTerm,
    "x",
  );
});

Deno.test("session context: nothing from the IP address; no context, or nothing usable, is null", () => {
  assert.equal(sessionPropertiesOf({ context: { ip: "203.0.113.9" } }), null);
  assert.equal(sessionPropertiesOf({ url: "https://a.example/" }), null);
  assert.equal(sessionPropertiesOf(undefined), null);
  assert.equal(sessionPropertiesOf({ context: "text" }), null);
  assert.equal(sessionPropertiesOf({ context: { page: { url: 42, referrer: "" } } }), null);
  // A URL that does not parse is kept as sent, with no path or UTM fields read from it.
  assert.deepEqual(sessionPropertiesOf({ context: { page: { url: "not a url" } } }), {
    landingPageURL: "not a url",
  });
});
