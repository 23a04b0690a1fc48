/**
 * A shop's storefront origins: the custom domains, besides `https://<shop>`, whose pages may post
 * to the storefront doors (`integrations.storefront_origins`, read by `findPixelShop`). The doors
 * compare the browser's `Origin` header byte for byte, so only the form a browser sends is stored:
 * scheme, lower-case host and a port other than the default, nothing else. See
 * docs/shopify_pixel.md.
 *
 * @module
 */
import type { Sql } from "../store/db.ts";
import { DomainError } from "../errors.ts";
import { bumpShopVersion } from "./brands.ts";

/** How many custom origins a shop may have: the doors check each request against all of them. */
export const MAX_STOREFRONT_ORIGINS = 50;

// A DNS name of two labels or more whose last label starts with a letter (so no IPv4 address).
const _DNS_NAME =
  /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
// A development storefront on this machine (Shopify CLI's `theme dev` serves
// http://127.0.0.1:9292): browsers treat loopback as a secure context, so http is taken there.
const _LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * Checks that `input` is a storefront origin exactly as a browser sends it in `Origin`; returns it,
 * or throws DomainError `invalid_input` saying what is wrong (with the form to give, when there is
 * one). A loopback host (a development storefront) may also be `http`.
 */
export function parseStorefrontOrigin(input: string): string {
  const refuse = (why: string) =>
    new DomainError("invalid_input", `not a storefront origin: ${JSON.stringify(input)}: ${why}`);
  if (input.length > 300) throw refuse("too long");
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw refuse("give scheme://host[:port], e.g. https://shop.example.com");
  }
  const host = url.hostname;
  const loopback = _LOOPBACK_HOSTS.has(host);
  if (url.protocol !== "https:" && !(loopback && url.protocol === "http:")) {
    throw refuse("only https (http only for localhost, 127.0.0.1 or [::1], for development)");
  }
  if (!_DNS_NAME.test(host) && !loopback) {
    throw refuse(`the host must be a domain name (got ${JSON.stringify(host)})`);
  }
  // The browser's serialization: no user, path, query or fragment, lower case, no default port.
  if (url.origin !== input) {
    throw refuse(
      `an origin is scheme://host[:port] in lower case with no path, query or fragment ` +
        `(did you mean ${url.origin}?)`,
    );
  }
  return input;
}

/** A shop's storefront origins as the operator sees them: the custom ones, in the order added. */
export interface StorefrontOrigins {
  brand: string;
  shop: string;
  origins: string[];
}

/** The brand's shop and its custom storefront origins. */
export async function listStorefrontOrigins(
  sql: Sql,
  brandId: string,
): Promise<StorefrontOrigins> {
  const [row] = await sql<{ shop_domain: string | null; storefront_origins: string[] | null }[]>`
    select i.shop_domain, i.storefront_origins from brands b
    left join integrations i on i.brand_id = b.id and i.provider = 'shopify'
    where b.id = ${brandId}`;
  if (!row?.shop_domain) throw _noIntegration(brandId, row !== undefined);
  return { brand: brandId, shop: row.shop_domain, origins: row.storefront_origins ?? [] };
}

/** Dependencies of {@linkcode changeStorefrontOrigins}. */
export interface StorefrontOriginDeps {
  sql: Sql;
  /** Where the shop's version is bumped, so every process's doors see the change at once. */
  kv: Deno.Kv;
  now: () => Date;
}

/**
 * Adds and removes custom storefront origins of the brand's shop in one transaction, then bumps
 * the shop's version. Adding one present or removing one absent changes nothing; `added` and
 * `removed` say what did change. An origin to remove is taken as stored when it is, so one set by
 * hand in another form can still be removed.
 */
export async function changeStorefrontOrigins(
  deps: StorefrontOriginDeps,
  input: { brandId: string; add: string[]; remove: string[] },
): Promise<StorefrontOrigins & { added: string[]; removed: string[] }> {
  const adds = input.add.map((origin) => parseStorefrontOrigin(origin));
  const both = adds.find((origin) => input.remove.includes(origin));
  if (both !== undefined) {
    throw new DomainError("invalid_input", `${both} is both added and removed`);
  }
  const result = await deps.sql.begin(async (tx) => {
    const [row] = await tx<{ id: string; shop_domain: string; storefront_origins: string[] }[]>`
      select id, shop_domain, storefront_origins from integrations
      where brand_id = ${input.brandId} and provider = 'shopify'
      for update`;
    if (!row) {
      const [brand] = await tx`select 1 from brands where id = ${input.brandId}`;
      throw _noIntegration(input.brandId, brand !== undefined);
    }
    const own = `https://${row.shop_domain}`;
    const stored = row.storefront_origins;
    const removes = input.remove.map((origin) =>
      stored.includes(origin) ? origin : parseStorefrontOrigin(origin)
    );
    for (const origin of [...adds, ...removes]) {
      if (origin === own) {
        throw new DomainError(
          "invalid_input",
          `${own} is the shop's own origin, always allowed: only custom domains are listed`,
        );
      }
    }
    const added = [...new Set(adds)].filter((origin) => !stored.includes(origin));
    const removed = [...new Set(removes)].filter((origin) => stored.includes(origin));
    const next = [...stored.filter((origin) => !removed.includes(origin)), ...added];
    if (next.length > MAX_STOREFRONT_ORIGINS) {
      throw new DomainError(
        "invalid_input",
        `a shop has at most ${MAX_STOREFRONT_ORIGINS} storefront origins (this would make ${next.length})`,
      );
    }
    if (added.length > 0 || removed.length > 0) {
      await tx`update integrations set storefront_origins = ${next}::text[],
                                       updated_at = ${deps.now()}
               where id = ${row.id}`;
    }
    return { brand: input.brandId, shop: row.shop_domain, origins: next, added, removed };
  });
  // After the commit: a reader bumped before it could cache the old origins under the new version.
  if (result.added.length > 0 || result.removed.length > 0) {
    await bumpShopVersion(deps.kv, result.shop);
  }
  return result;
}

/** The error for a brand without a storefront integration: not found when there is no brand. */
function _noIntegration(brandId: string, brandExists: boolean): DomainError {
  return brandExists
    ? new DomainError(
      "invalid_input",
      "the brand has no storefront integration (create it with --shop)",
    )
    : new DomainError("not_found", `no brand ${brandId}`);
}
