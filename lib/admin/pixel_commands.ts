/**
 * `pixel`: prints the storefront pixel as a Shopify custom pixel (Settings → Customer events →
 * Add custom pixel) for a brand's shop, with the service's public URL filled in. The code is the
 * app web pixel extension's own (extensions/web-pixel/src/pixel.js) and a call that starts it on
 * the globals Shopify gives a custom pixel. docs/shopify_pixel.md describes both forms.
 *
 * @module
 */
import { findBrandContext } from "../tenancy/brands.ts";
import {
  brandIdArg,
  type Commands,
  defineCommand,
  parseFlags,
  requiredFlag,
  UsageError,
} from "./command.ts";

const _PIXEL_SOURCE = new URL("../../extensions/web-pixel/src/pixel.js", import.meta.url);

/** `pixel`. */
export const pixelCommands: Commands = {
  pixel: defineCommand({
    usage: `--brand ID [--url URL]   (URL: the service's public base URL; default ADMIN_URL)`,
    summary: "Prints the storefront pixel's custom-pixel code for the brand's shop (`code`: " +
      "paste it into Settings → Customer events), posting to URL/cdp/ingest/shopify.",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" }, url: { type: "string" } });
      const url = values.url as string | undefined;
      if (url !== undefined && !/^https?:\/\/[^/?#]+\/?$/.test(url)) {
        throw new UsageError("--url is a scheme and host, e.g. https://cdp.example.com");
      }
      return { brandId: brandIdArg(requiredFlag(values, "brand")), url };
    },
    async run(stores, input, config) {
      const serviceUrl = (input.url ?? config.adminUrl)?.replace(/\/+$/, "");
      if (!serviceUrl) throw new Error("pass --url (the service's public base URL)");
      const brand = await findBrandContext(stores.sql, input.brandId);
      if (!brand) throw new Error(`no brand ${input.brandId}`);
      if (!brand.scope) throw new Error(`brand ${input.brandId} has no connected shop`);
      return {
        shop: brand.scope,
        endpoint: `${serviceUrl}/cdp/ingest/shopify?shop=${brand.scope}`,
        code: customPixelCode(await Deno.readTextFile(_PIXEL_SOURCE), serviceUrl, brand.scope),
      };
    },
  }),
};

/**
 * The custom pixel: pixel.js as a script (its `export`s dropped) and the call that starts it. A
 * custom pixel has `analytics`, `browser` and `init` as globals; consent changes come through
 * `customerPrivacy` (or `api.customerPrivacy`) where Shopify provides it.
 */
export function customPixelCode(source: string, serviceUrl: string, shop: string): string {
  const script = source.replace(/^export (const|function) /gm, "$1 ");
  return [
    `// Customer-data service pixel for ${shop}: Settings → Customer events → Add custom pixel,`,
    `// permission "Analytics" (data sale: not required).`,
    script.trimEnd(),
    "",
    "startPixel({",
    "  analytics,",
    "  browser,",
    "  init,",
    '  customerPrivacy: typeof customerPrivacy === "object" ? customerPrivacy',
    '    : typeof api === "object" ? api?.customerPrivacy : undefined,',
    `  settings: { serviceUrl: ${JSON.stringify(serviceUrl)} },`,
    "});",
    "",
  ].join("\n");
}
