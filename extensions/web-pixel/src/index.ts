/**
 * The app web pixel extension: Shopify loads it in the storefront's strict sandbox (a Web
 * Worker) with `register`'s API; the pixel itself is pixel.js, which the custom pixel shares.
 *
 * @module
 */
import { register } from "@shopify/web-pixels-extension";
// @ts-types="./pixel.d.ts"
import { startPixel } from "./pixel.js";

register(({ analytics, browser, init, customerPrivacy, settings }) => {
  startPixel({
    analytics,
    browser,
    init,
    customerPrivacy,
    settings: { serviceUrl: String(settings.serviceUrl ?? "") },
  });
});
