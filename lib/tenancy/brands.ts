/**
 * Tenancy: who a request acts for. This group owns brands (this module: records, shop
 * domains, storefront integrations and the scope they resolve, the brand cache), their
 * storefront origins (storefront_origins.ts), API keys (api_keys.ts), Shopify session tokens
 * (session_token.ts) and the encryption of storefront tokens at rest (token_cipher.ts). See
 * docs/architecture.md.
 *
 * @module
 */
import type { Sql, Tx } from "../store/db.ts";
import { DomainError } from "../errors.ts";
import { brandVersionKey, shopVersionKey } from "../store/kv_keys.ts";
import type { TokenCipher } from "./token_cipher.ts";

/** The permission that opens commerce, customer and insight routes. */
export const BETA_COMMERCE = "beta:cdp-commerce";

const _SHOP_DOMAIN = /^[a-z0-9][a-z0-9-]{0,62}\.myshopify\.com$/;

/** Normalizes a shop domain (trim, lower-case) and returns it, or null if not `*.myshopify.com`. */
export function parseShopDomain(input: string): string | null {
  const domain = input.trim().toLowerCase();
  return _SHOP_DOMAIN.test(domain) ? domain : null;
}

/** What the request pipeline needs to know about a brand. */
export interface BrandContext {
  brandId: string;
  name: string;
  /** The connected shop domain; null when the brand has no storefront integration. */
  scope: string | null;
  beta: boolean;
  integration: {
    status: "connected" | "disconnected";
    isEnabled: boolean;
    /** When shop/redact erased the shop's data; the brand may not write until reconnected. */
    redactedAt: string | null;
  } | null;
}

/** Why a brand whose shop was erased may not write (the 403's description). */
export const SHOP_ERASED_MESSAGE = "the shop's data was erased (shop/redact); " +
  "an operator must reconnect it (admin brand set --integration connected)";

/** True when shop/redact erased the brand's shop and no operator has reconnected it since. */
export function isShopErased(brand: BrandContext): boolean {
  return brand.integration?.redactedAt != null;
}

/** Refuses a write for a brand whose shop data was erased (DomainError `forbidden`). */
export function assertBrandWritable(brand: BrandContext): void {
  if (isShopErased(brand)) throw new DomainError("forbidden", SHOP_ERASED_MESSAGE);
}

/** The operator view printed by `brand set`. */
export interface BrandView {
  id: string;
  name: string;
  shop: string | null;
  beta: boolean;
  integration: "connected" | "disconnected" | null;
  /** When shop/redact erased the shop's data (writes refused until reconnected), or null. */
  redacted_at: string | null;
}

/** Loads a brand with its scope, permission and integration state; null if it does not exist. */
export async function findBrandContext(sql: Sql, brandId: string): Promise<BrandContext | null> {
  const [row] = await sql<{
    id: string;
    name: string;
    shop_domain: string | null;
    status: "connected" | "disconnected" | null;
    is_enabled: boolean | null;
    redacted_at: Date | null;
    beta: boolean;
  }[]>`
    select b.id, b.name, i.shop_domain, i.status, i.is_enabled, i.redacted_at,
           exists (select 1 from brand_permissions p
                   where p.brand_id = b.id and p.permission = ${BETA_COMMERCE}) as beta
    from brands b
    left join integrations i on i.brand_id = b.id and i.provider = 'shopify'
    where b.id = ${brandId}`;
  if (!row) return null;
  return {
    brandId: row.id,
    name: row.name,
    scope: row.shop_domain,
    beta: row.beta,
    integration: row.status
      ? {
        status: row.status,
        isEnabled: row.is_enabled ?? false,
        redactedAt: row.redacted_at ? new Date(row.redacted_at).toISOString() : null,
      }
      : null,
  };
}

/**
 * Marks a brand changed, after the change committed: every process's cached context of it is
 * dropped on its next request. (Before the commit, a reader could cache the old state under the
 * new version.)
 */
export async function bumpBrandVersion(kv: Deno.Kv, brandId: string): Promise<void> {
  await kv.set(brandVersionKey(brandId), Date.now());
}

/**
 * Marks a shop's storefront integration changed, after the change committed: every process's
 * cached pixel shop of it ({@linkcode createPixelShopCache}) is dropped on its next request.
 */
export async function bumpShopVersion(kv: Deno.Kv, shop: string): Promise<void> {
  await kv.set(shopVersionKey(shop), Date.now());
}

/** An in-process cache of brand contexts, each valid for one version of the brand. */
export interface BrandCache {
  /**
   * The brand's context: cached when `version` (the versionstamp of its version key, null
   * when never bumped) is the one it was loaded under and it is younger than the TTL.
   */
  get(sql: Sql, brandId: string, version: string | null): Promise<BrandContext | null>;
}

/**
 * A brand-context cache for one process. Writers bump the brand's version in KV after they
 * commit, so a change through the service or the CLI applies to the next request; the TTL bounds
 * how long a change that bypasses them (SQL by hand) can go unseen.
 */
export function createBrandCache(
  options: { ttlMs: number; now: () => Date; max?: number },
): BrandCache {
  const entries = new Map<string, { version: string | null; at: number; context: BrandContext }>();
  const max = options.max ?? 10_000;
  return {
    async get(sql, brandId, version) {
      const now = options.now().getTime();
      const hit = entries.get(brandId);
      if (hit && hit.version === version && now - hit.at < options.ttlMs) return hit.context;
      const context = await findBrandContext(sql, brandId);
      entries.delete(brandId);
      if (context) {
        // Oldest first in a Map: dropping the first entry keeps the cache bounded.
        if (entries.size >= max) entries.delete(entries.keys().next().value!);
        entries.set(brandId, { version, at: now, context });
      }
      return context;
    },
  };
}

/** Dependencies of brand provisioning. */
export interface BrandDeps {
  sql: Sql;
  newId: () => string;
  now: () => Date;
  cipher: TokenCipher;
  /** Where a new shop's version is bumped (the pixel doors' cache); without it, seen within its TTL. */
  kv?: Deno.Kv;
}

/** Creates a brand, optionally connecting its shop and granting the commerce beta. */
export async function createBrand(
  deps: BrandDeps,
  input: { name: string; shop?: string; accessToken?: string; beta?: boolean },
): Promise<{ id: string; name: string; shop: string | null }> {
  const name = input.name.trim();
  if (name.length < 1 || name.length > 200) {
    throw new DomainError("invalid_input", "name must be 1 to 200 characters");
  }
  const shop = input.shop === undefined ? null : parseShopDomain(input.shop);
  if (input.shop !== undefined && shop === null) {
    throw new DomainError("invalid_input", `not a *.myshopify.com shop domain: ${input.shop}`);
  }
  if (input.accessToken !== undefined && shop === null) {
    throw new DomainError("invalid_input", "an access token needs a shop");
  }
  const ciphertext = input.accessToken === undefined
    ? null
    : await deps.cipher.encrypt(input.accessToken);
  const id = deps.newId();
  const now = deps.now();
  await deps.sql.begin(async (tx) => {
    await tx`insert into brands (id, name, created_at, updated_at)
             values (${id}, ${name}, ${now}, ${now})`;
    if (shop) {
      const [taken] = await tx`select 1 from integrations where shop_domain = ${shop}`;
      const conflict = () => new DomainError("conflict", `shop ${shop} belongs to another brand`);
      if (taken) throw conflict();
      await tx`
        insert into integrations (id, integration_id, brand_id, shop_domain, status, connected_at,
                                  access_token_ciphertext, created_at, updated_at)
        values (${deps.newId()}, ${crypto.randomUUID()}, ${id}, ${shop}, 'connected', ${now},
                ${ciphertext}, ${now}, ${now})`
        .catch((err) => {
          // A concurrent create of the same shop passes the check above and loses on the unique
          // index instead (every other unique column here is freshly generated).
          throw (err as { code?: string }).code === "23505" ? conflict() : err;
        });
    }
    if (input.beta) {
      await tx`insert into brand_permissions (brand_id, permission, granted_at)
               values (${id}, ${BETA_COMMERCE}, ${now})`;
    }
  });
  if (shop && deps.kv) await bumpShopVersion(deps.kv, shop);
  return { id, name, shop };
}

/** Turns the commerce beta on or off and connects or disconnects the storefront integration. */
export async function setBrand(
  deps: Pick<BrandDeps, "sql" | "now"> & { kv: Deno.Kv },
  input: { brandId: string; beta?: boolean; integration?: "connected" | "disconnected" },
): Promise<BrandView> {
  const now = deps.now();
  const shops: string[] = [];
  await deps.sql.begin(async (tx) => {
    const [brand] = await tx`select id from brands where id = ${input.brandId} for update`;
    if (!brand) throw new DomainError("not_found", `no brand ${input.brandId}`);
    if (input.beta === true) {
      await tx`insert into brand_permissions (brand_id, permission, granted_at)
               values (${input.brandId}, ${BETA_COMMERCE}, ${now})
               on conflict do nothing`;
    } else if (input.beta === false) {
      await tx`delete from brand_permissions
               where brand_id = ${input.brandId} and permission = ${BETA_COMMERCE}`;
    }
    if (input.integration) {
      const updated = await tx`
        update integrations
        set status = ${input.integration},
            connected_at = case when ${input.integration} = 'connected' and status <> 'connected'
                                then ${now}::timestamptz else connected_at end,
            -- Reconnecting is the operator's decision to let an erased shop write again.
            redacted_at = case when ${input.integration} = 'connected' then null
                               else redacted_at end,
            updated_at = ${now}
        where brand_id = ${input.brandId} and provider = 'shopify'
        returning shop_domain`;
      shops.push(...updated.map((row) => row.shop_domain as string));
      if (updated.count === 0) {
        throw new DomainError(
          "invalid_input",
          "the brand has no storefront integration (create it with --shop)",
        );
      }
    }
    await tx`update brands set updated_at = ${now} where id = ${input.brandId}`;
  });
  await bumpBrandVersion(deps.kv, input.brandId);
  for (const shop of shops) await bumpShopVersion(deps.kv, shop);
  const context = await findBrandContext(deps.sql, input.brandId);
  if (!context) throw new DomainError("not_found", `no brand ${input.brandId}`);
  return {
    id: context.brandId,
    name: context.name,
    shop: context.scope,
    beta: context.beta,
    integration: context.integration?.status ?? null,
    redacted_at: context.integration?.redactedAt ?? null,
  };
}

/** A brand as the operator lists it: its view and when it was created. */
export type BrandListing = BrandView & { created_at: string };

/** Every brand, oldest first, or only `brandId` (an empty list when it does not exist). */
export async function listBrands(sql: Sql, brandId?: string): Promise<BrandListing[]> {
  const rows = await sql<{
    id: string;
    name: string;
    shop_domain: string | null;
    status: "connected" | "disconnected" | null;
    redacted_at: Date | null;
    beta: boolean;
    created_at: Date;
  }[]>`
    select b.id, b.name, i.shop_domain, i.status, i.redacted_at, b.created_at,
           exists (select 1 from brand_permissions p
                   where p.brand_id = b.id and p.permission = ${BETA_COMMERCE}) as beta
    from brands b
    left join integrations i on i.brand_id = b.id and i.provider = 'shopify'
    ${brandId === undefined ? sql`` : sql`where b.id = ${brandId}`}
    order by b.created_at, b.id`;
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    shop: row.shop_domain,
    beta: row.beta,
    integration: row.status,
    redacted_at: row.redacted_at ? new Date(row.redacted_at).toISOString() : null,
    created_at: new Date(row.created_at).toISOString(),
  }));
}

/** A shop that may receive storefront pixel events: connected, enabled, with its origins. */
export interface PixelShop {
  brandId: string;
  scope: string;
  origins: string[];
}

/** The connected, enabled integration of a shop domain, or null. */
export async function findPixelShop(sql: Sql, shop: string): Promise<PixelShop | null> {
  const [row] = await sql<
    { brand_id: string; shop_domain: string; storefront_origins: string[] }[]
  >`
    select brand_id, shop_domain, storefront_origins from integrations
    where shop_domain = ${shop} and status = 'connected' and is_enabled and redacted_at is null`;
  if (!row) return null;
  return {
    brandId: row.brand_id,
    scope: row.shop_domain,
    origins: [`https://${row.shop_domain}`, ...row.storefront_origins],
  };
}

/** An in-process cache of the pixel doors' shop lookups, unknown shops included. */
export interface PixelShopCache {
  /**
   * The shop's {@linkcode findPixelShop}: cached (null too) when `version` (the versionstamp of
   * its {@linkcode shopVersionKey}, null when never bumped) is the one it was loaded under and it
   * is younger than the TTL.
   */
  get(sql: Sql, shop: string, version: string | null): Promise<PixelShop | null>;
}

/**
 * A pixel-shop cache for one app. Writers bump the shop's version in KV after they commit, so a
 * shop connected, disconnected or erased through the service or the CLI is seen on the next
 * request; the TTL bounds how long a change that bypasses them (storefront origins set by SQL)
 * can go unseen. Unknown shops are cached as well (a storefront that is not connected still costs
 * no query per request); past `max` entries the least recently used goes.
 */
export function createPixelShopCache(
  options: { ttlMs: number; now: () => Date; max?: number },
): PixelShopCache {
  const entries = new Map<
    string,
    { version: string | null; at: number; shop: Promise<PixelShop | null> }
  >();
  const max = options.max ?? 10_000;
  return {
    get(sql, shop, version) {
      const now = options.now().getTime();
      const hit = entries.get(shop);
      if (hit && hit.version === version && now - hit.at < options.ttlMs) {
        // Re-inserted: a Map iterates oldest first, so its first key is the least recently used.
        entries.delete(shop);
        entries.set(shop, hit);
        return hit.shop;
      }
      // The lookup's promise is the entry: concurrent requests for a shop not cached share one.
      const entry = { version, at: now, shop: findPixelShop(sql, shop) };
      entries.delete(shop);
      if (entries.size >= max) entries.delete(entries.keys().next().value!);
      entries.set(shop, entry);
      entry.shop.catch(() => {
        if (entries.get(shop) === entry) entries.delete(shop);
      });
      return entry.shop;
    },
  };
}

/** The brand whose storefront integration is that shop (whatever its status), or null. */
export async function findBrandIdByShop(sql: Sql, shop: string): Promise<string | null> {
  const [row] = await sql<{ brand_id: string }[]>`
    select brand_id from integrations where shop_domain = ${shop}`;
  return row?.brand_id ?? null;
}

// One lock per scope: writes to the scope's data hold it shared, shop/redact exclusively.
function _scopeWritesLock(tx: Tx, scope: string, mode: "shared" | "exclusive") {
  const key = `scope-writes|${scope}`;
  return mode === "shared"
    ? tx`select pg_advisory_xact_lock_shared(hashtextextended(${key}, 0))`
    : tx`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
}

/**
 * For a transaction about to write a scope's data: takes the scope's write lock (shared, until
 * the transaction ends) and returns true when shop/redact erased the scope, so nothing may be
 * written. Held through the commit, the lock makes an erasure wait for writes in flight (then
 * erase them too), and writes that come after it see the mark.
 */
export async function scopeWritesClosed(tx: Tx, scope: string): Promise<boolean> {
  // Two statements sent together (one round trip): the second's snapshot is taken once the first
  // holds the lock, so it sees an erasure that committed while the lock was awaited.
  const [, rows] = await Promise.all([
    _scopeWritesLock(tx, scope, "shared"),
    tx<{ closed: boolean }[]>`
      select redacted_at is not null as closed from integrations where shop_domain = ${scope}`,
  ]);
  return rows[0]?.closed ?? false;
}

/**
 * Waits for the writes in flight to the scope and holds off new ones until the transaction ends
 * (an erasure's first step: what it marks is seen by every write that comes after it).
 */
export async function holdScopeWrites(tx: Tx, scope: string): Promise<void> {
  await _scopeWritesLock(tx, scope, "exclusive");
}

/**
 * shop/redact's first step: waits for the writes in flight to the shop's scope, then marks the
 * integration erased (the brand may not write until an operator reconnects it). The erasure runs
 * next in the same transaction.
 */
export async function closeScopeWrites(tx: Tx, scope: string, now: Date): Promise<void> {
  await _scopeWritesLock(tx, scope, "exclusive");
  await tx`update integrations set redacted_at = ${now}, updated_at = ${now}
           where shop_domain = ${scope}`;
}
