import assert from "node:assert/strict";
import { monotonicFactory } from "ulid";
import { createBrand, findPixelShop } from "../../../lib/tenancy/brands.ts";
import {
  changeStorefrontOrigins,
  listStorefrontOrigins,
  MAX_STOREFRONT_ORIGINS,
  parseStorefrontOrigin,
  type StorefrontOriginDeps,
} from "../../../lib/tenancy/storefront_origins.ts";
import { shopVersionKey } from "../../../lib/store/kv_keys.ts";
import { DomainError } from "../../../lib/errors.ts";
import { openTokenCipher } from "../../../lib/tenancy/token_cipher.ts";
import { freshDatabase, testClock } from "../../test_support.ts";

const SHOP = "acme.myshopify.com";

/** A fresh database and KV with one brand on SHOP and one without a shop. */
async function withShop(
  fn: (deps: StorefrontOriginDeps, brands: { shop: string; bare: string }) => Promise<void>,
) {
  const database = await freshDatabase();
  const kv = await Deno.openKv(":memory:");
  try {
    const clock = testClock();
    const cipher = await openTokenCipher(kv, undefined);
    const brandDeps = { sql: database.sql, kv, newId: monotonicFactory(), now: clock.now, cipher };
    const shop = await createBrand(brandDeps, { name: "Acme", shop: SHOP });
    const bare = await createBrand(brandDeps, { name: "Bare" });
    await fn({ sql: database.sql, kv, now: clock.now }, { shop: shop.id, bare: bare.id });
  } finally {
    kv.close();
    await database.close();
  }
}

function refused(kind: DomainError["kind"], message: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof DomainError, `not a DomainError: ${err}`);
    assert.equal(err.kind, kind);
    assert.match(err.message, message);
    return true;
  };
}

Deno.test("parseStorefrontOrigin: only the form a browser sends in Origin", () => {
  for (
    const origin of [
      "https://shop.example.com",
      "https://www.shop.example.co.uk",
      "https://shop.example.com:8443",
      "https://xn--bcher-kva.example",
    ]
  ) {
    assert.equal(parseStorefrontOrigin(origin), origin);
  }
  const cases: [string, RegExp][] = [
    ["http://shop.example.com", /only https \(http only for localhost/],
    ["ftp://shop.example.com", /only https/],
    ["shop.example.com", /give scheme:\/\/host/],
    ["", /give scheme:\/\/host/],
    ["null", /give scheme:\/\/host/],
    ["https://shop.example.com/", /did you mean https:\/\/shop\.example\.com\?/],
    ["https://shop.example.com/path", /no path/],
    ["https://shop.example.com?q=1", /did you mean https:\/\/shop\.example\.com\?/],
    ["https://shop.example.com#x", /did you mean/],
    ["https://Shop.Example.com", /lower case .*did you mean https:\/\/shop\.example\.com\?/],
    ["HTTPS://shop.example.com", /did you mean https:\/\/shop\.example\.com\?/],
    ["https://shop.example.com:443", /did you mean https:\/\/shop\.example\.com\?/],
    ["https://user@shop.example.com", /did you mean https:\/\/shop\.example\.com\?/],
    ["https://bücher.example", /did you mean https:\/\/xn--bcher-kva\.example\?/],
    ["https://*.example.com", /the host must be a domain name/],
    ["https://intranet", /the host must be a domain name/],
    ["https://10.0.0.1", /the host must be a domain name/],
    ["http://10.0.0.1", /only https/],
    ["https://[2001:db8::1]", /the host must be a domain name/],
    [` https://shop.example.com`, /did you mean/],
    [`https://${"a".repeat(300)}.com`, /too long/],
  ];
  for (const [input, message] of cases) {
    assert.throws(
      () => parseStorefrontOrigin(input),
      refused("invalid_input", message),
      input,
    );
  }
  // A development storefront on loopback: http too.
  for (
    const origin of [
      "http://127.0.0.1:9292",
      "http://localhost:3000",
      "http://[::1]:9000",
      "https://localhost",
    ]
  ) {
    assert.equal(parseStorefrontOrigin(origin), origin);
  }
  assert.throws(
    () => parseStorefrontOrigin("http://localhost:3000/"),
    refused("invalid_input", /did you mean/),
  );
  assert.throws(
    () => parseStorefrontOrigin("ws://localhost"),
    refused("invalid_input", /only https/),
  );
});

Deno.test("storefront origins: add, idempotent add, remove; the doors' lookup sees them; the version bumped", async () => {
  await withShop(async (deps, brands) => {
    const version = async () => (await deps.kv.get(shopVersionKey(SHOP))).versionstamp;
    assert.deepEqual(await listStorefrontOrigins(deps.sql, brands.shop), {
      brand: brands.shop,
      shop: SHOP,
      origins: [],
    });
    const before = await version();
    const added = await changeStorefrontOrigins(deps, {
      brandId: brands.shop,
      add: ["https://shop.acme.example", "https://www.acme.example", "https://shop.acme.example"],
      remove: [],
    });
    assert.deepEqual(added, {
      brand: brands.shop,
      shop: SHOP,
      origins: ["https://shop.acme.example", "https://www.acme.example"],
      added: ["https://shop.acme.example", "https://www.acme.example"],
      removed: [],
    });
    const bumped = await version();
    assert.notEqual(bumped, before);
    assert.deepEqual((await findPixelShop(deps.sql, SHOP))?.origins, [
      `https://${SHOP}`,
      "https://shop.acme.example",
      "https://www.acme.example",
    ]);

    // Adding what is there (and removing what is not) changes nothing, and bumps nothing.
    const again = await changeStorefrontOrigins(deps, {
      brandId: brands.shop,
      add: ["https://www.acme.example"],
      remove: ["https://gone.acme.example"],
    });
    assert.deepEqual(again.added, []);
    assert.deepEqual(again.removed, []);
    assert.deepEqual(again.origins, ["https://shop.acme.example", "https://www.acme.example"]);
    assert.equal(await version(), bumped);

    // Remove and add in one call: one transaction, order kept, the new one last.
    const swapped = await changeStorefrontOrigins(deps, {
      brandId: brands.shop,
      add: ["https://new.acme.example"],
      remove: ["https://shop.acme.example"],
    });
    assert.deepEqual(swapped.origins, ["https://www.acme.example", "https://new.acme.example"]);
    assert.deepEqual(swapped.removed, ["https://shop.acme.example"]);
    assert.notEqual(await version(), bumped);
    assert.deepEqual(
      (await listStorefrontOrigins(deps.sql, brands.shop)).origins,
      swapped.origins,
    );

    // One set by hand in a form the command refuses can still be removed, as stored.
    await deps.sql`update integrations set storefront_origins = array['https://Odd.example/']
                   where shop_domain = ${SHOP}`;
    const cleaned = await changeStorefrontOrigins(deps, {
      brandId: brands.shop,
      add: [],
      remove: ["https://Odd.example/"],
    });
    assert.deepEqual(cleaned.origins, []);
  });
});

Deno.test("storefront origins: invalid origins refused, nothing written; unknown brand, no integration", async () => {
  await withShop(async (deps, brands) => {
    await changeStorefrontOrigins(deps, {
      brandId: brands.shop,
      add: ["https://shop.acme.example"],
      remove: [],
    });
    const version = (await deps.kv.get(shopVersionKey(SHOP))).versionstamp;
    const change = (add: string[], remove: string[] = []) =>
      changeStorefrontOrigins(deps, { brandId: brands.shop, add, remove });
    // One bad origin refuses the whole change.
    await assert.rejects(
      change(["https://ok.acme.example", "http://shop.acme.example"]),
      refused("invalid_input", /only https/),
    );
    await assert.rejects(
      change([], ["https://shop.acme.example", "https://shop.acme.example/"]),
      refused("invalid_input", /did you mean/),
    );
    await assert.rejects(
      change([`https://${SHOP}`]),
      refused("invalid_input", /the shop's own origin, always allowed/),
    );
    await assert.rejects(
      change([], [`https://${SHOP}`]),
      refused("invalid_input", /the shop's own origin/),
    );
    await assert.rejects(
      change(["https://a.acme.example"], ["https://a.acme.example"]),
      refused("invalid_input", /both added and removed/),
    );
    const many = Array.from({ length: MAX_STOREFRONT_ORIGINS }, (_, i) => `https://s${i}.example`);
    await assert.rejects(change(many), refused("invalid_input", /at most 50 storefront origins/));
    assert.deepEqual((await listStorefrontOrigins(deps.sql, brands.shop)).origins, [
      "https://shop.acme.example",
    ]);
    assert.equal((await deps.kv.get(shopVersionKey(SHOP))).versionstamp, version);
    // http with the development setting.
    assert.deepEqual((await change(["http://127.0.0.1:8123"])).added, [
      "http://127.0.0.1:8123",
    ]);

    const missing = "01M86TDT9CSKW28VQJZ3VT7SDR";
    for (const brandId of [missing, brands.bare]) {
      const expected = brandId === missing
        ? refused("not_found", /no brand/)
        : refused("invalid_input", /no storefront integration/);
      await assert.rejects(listStorefrontOrigins(deps.sql, brandId), expected);
      await assert.rejects(
        changeStorefrontOrigins(deps, {
          brandId,
          add: ["https://shop.acme.example"],
          remove: [],
        }),
        expected,
      );
    }
  });
});
