/** The types of pixel.js (plain JavaScript: the custom pixel is pasted as it is). */
export declare const PIXEL_MAX_BATCH: number;
/** The standard events the service stores. */
export declare const PIXEL_EVENTS: readonly string[];
/** Starts the pixel on the API that `register` (or the custom pixel's globals) provides. */
export declare function startPixel(api: {
  analytics: unknown;
  browser: unknown;
  init: unknown;
  customerPrivacy?: unknown;
  settings: { serviceUrl: string };
}): void;
/** A standard event with only what the service stores. */
export declare function trimEvent(event: unknown): unknown;
