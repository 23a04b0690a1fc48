/**
 * Operator commands of the embedded app: `app-url` opens a brand's dashboard outside the
 * Shopify admin, with a session token minted as Shopify would.
 *
 * @module
 */
import { findBrandContext } from "../tenancy/brands.ts";
import { signSessionToken } from "../tenancy/session_token.ts";
import {
  brandIdArg,
  type Commands,
  defineCommand,
  parseFlags,
  requiredFlag,
  UsageError,
} from "./command.ts";

/** Lifetime of a minted session token: Shopify's own, one minute to open the URL. */
export const APP_URL_TOKEN_SECONDS = 60;

/** `app-url`. */
export const appCommands: Commands = {
  "app-url": defineCommand({
    usage: `--brand ID [--origin URL]   (needs SHOPIFY_API_KEY and SHOPIFY_API_SECRET)`,
    summary: "Prints a URL that opens the brand's dashboard (/app) with a session token " +
      "minted as Shopify would, valid one minute.",
    parse(args) {
      const { values } = parseFlags(args, {
        brand: { type: "string" },
        origin: { type: "string" },
      });
      const brandId = brandIdArg(requiredFlag(values, "brand"));
      const origin = values.origin as string | undefined;
      if (origin !== undefined && !/^https?:\/\/[^/]+$/.test(origin)) {
        throw new UsageError("--origin is a scheme and host, e.g. http://localhost:8000");
      }
      return { brandId, origin };
    },
    async run(stores, input, config) {
      const { apiKey, apiSecret } = config.shopify;
      if (!apiKey || !apiSecret) {
        throw new Error("set SHOPIFY_API_KEY and SHOPIFY_API_SECRET to mint a session token");
      }
      const brand = await findBrandContext(stores.sql, input.brandId);
      if (!brand) throw new Error(`no brand ${input.brandId}`);
      if (!brand.scope) throw new Error(`brand ${input.brandId} has no connected shop`);
      const now = Math.floor(Date.now() / 1000);
      const exp = now + APP_URL_TOKEN_SECONDS;
      const token = await signSessionToken({
        iss: `https://${brand.scope}/admin`,
        dest: `https://${brand.scope}`,
        aud: apiKey,
        sub: "operator",
        exp,
        nbf: now,
        iat: now,
        jti: crypto.randomUUID(),
      }, apiSecret);
      const url = new URL("/app", input.origin ?? `http://localhost:${config.port || 8000}`);
      url.searchParams.set("shop", brand.scope);
      url.searchParams.set("id_token", token);
      return {
        url: url.toString(),
        shop: brand.scope,
        expires_at: new Date(exp * 1000).toISOString(),
      };
    },
  }),
};
