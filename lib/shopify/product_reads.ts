/**
 * A brand's product reads: its stored access token (decrypted only to call Shopify), a
 * read-through cache in Deno KV, and the Admin API client behind them.
 *
 * @module
 */
import type { Config } from "../config.ts";
import { DomainError } from "../errors.ts";
import { log } from "../log.ts";
import type { Sql } from "../store/db.ts";
import { productCacheKey } from "../store/kv_keys.ts";
import type { TokenCipher } from "../tenancy/token_cipher.ts";
import {
  describeError,
  type Product,
  type ProductPage,
  PRODUCTS_FORBIDDEN,
  type ShopifyAdmin,
  shopifyAdminFromConfig,
  type ShopifyCredentials,
} from "./admin_client.ts";

/** Largest cache entry written; KV refuses values over 64 KiB, and a bigger page just is not cached. */
const _MAX_CACHE_BYTES = 64_000;

interface _CacheEntry<T> {
  expiresAt: number;
  value: T;
}

/** Product reads of one app: its client, its token cipher, its cache. */
export interface ProductReads {
  list(
    brand: { brandId: string; scope: string },
    page: { first: number; after?: string },
  ): Promise<ProductPage>;
  get(brand: { brandId: string; scope: string }, id: string): Promise<Product | null>;
}

/** Builds the product reads over the app's dependencies (the client defaults to the config's). */
export function createProductReads(
  deps: {
    kv: Deno.Kv;
    sql: Sql;
    now: () => Date;
    config: Config;
    cipher: Pick<TokenCipher, "decrypt">;
    shopify?: ShopifyAdmin;
  },
): ProductReads {
  const client = deps.shopify ?? shopifyAdminFromConfig(deps.config);
  const ttlMs = deps.config.productCacheTtlSeconds * 1000;

  async function credentials(
    brand: { brandId: string; scope: string },
    ciphertext: string,
  ): Promise<ShopifyCredentials> {
    try {
      return { shop: brand.scope, accessToken: await deps.cipher.decrypt(ciphertext) };
    } catch (err) {
      // An operator problem (TOKEN_ENCRYPTION_KEY changed), not the brand's: 500, logged.
      throw new DomainError("internal", "The stored access token cannot be decrypted", {
        cause: err,
      });
    }
  }

  async function storedToken(brand: { brandId: string; scope: string }): Promise<string> {
    const [row] = await deps.sql<{ access_token_ciphertext: string | null }[]>`
      select access_token_ciphertext from integrations
      where brand_id = ${brand.brandId} and provider = 'shopify' and shop_domain = ${brand.scope}`;
    if (!row?.access_token_ciphertext) {
      throw new DomainError("forbidden", `${PRODUCTS_FORBIDDEN}: no access token is stored`);
    }
    return row.access_token_ciphertext;
  }

  async function readThrough<T>(
    key: Deno.KvKey,
    load: () => Promise<T>,
    cacheable: (value: T) => boolean,
  ): Promise<T> {
    if (ttlMs > 0) {
      const hit = await deps.kv.get<Uint8Array>(key);
      const entry = hit.value instanceof Uint8Array ? _decodeEntry<T>(hit.value) : null;
      // KV expiry is lazy: the entry's own deadline, on the service clock, decides.
      if (entry && entry.expiresAt > deps.now().getTime()) return entry.value;
    }
    const value = await load();
    if (ttlMs > 0 && cacheable(value)) {
      const entry: _CacheEntry<T> = { expiresAt: deps.now().getTime() + ttlMs, value };
      const bytes = new TextEncoder().encode(JSON.stringify(entry));
      if (bytes.byteLength <= _MAX_CACHE_BYTES) {
        try {
          await deps.kv.set(key, bytes, { expireIn: ttlMs });
        } catch (err) {
          // The answer is good; a cache that cannot be written only costs the next caller.
          log("warn", "product cache write failed", { error: describeError(err) });
        }
      }
    }
    return value;
  }

  return {
    async list(brand, page) {
      const ciphertext = await storedToken(brand);
      const key = productCacheKey(brand.scope, "list", `${page.first}:${page.after ?? ""}`);
      return await readThrough(
        key,
        async () => client.listProducts(await credentials(brand, ciphertext), page),
        () => true,
      );
    },
    async get(brand, id) {
      const ciphertext = await storedToken(brand);
      const key = productCacheKey(brand.scope, "product", id);
      return await readThrough(
        key,
        async () => client.getProduct(await credentials(brand, ciphertext), id),
        (product) => product !== null,
      );
    },
  };
}

// An unreadable entry (written by another version, say) is a miss, never an error.
function _decodeEntry<T>(bytes: Uint8Array): _CacheEntry<T> | null {
  try {
    const entry = JSON.parse(new TextDecoder().decode(bytes));
    return typeof entry?.expiresAt === "number" && "value" in entry ? entry : null;
  } catch {
    return null;
  }
}
