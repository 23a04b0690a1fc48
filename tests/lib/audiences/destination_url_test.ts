import assert from "node:assert/strict";
import {
  assertDeliverable,
  isPublicAddress,
  parseDestinationUrl,
} from "../../../lib/audiences/destination_url.ts";
import { DomainError } from "../../../lib/errors.ts";

Deno.test("isPublicAddress: refuses loopback, private, link-local, metadata and reserved ranges", () => {
  for (
    const address of [
      "127.0.0.1",
      "10.0.0.1",
      "172.16.5.4",
      "172.31.255.255",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "255.255.255.255",
      "198.18.0.1",
      "::",
      "::1",
      "fe80::1",
      "fc00::1",
      "fd00:ec2::254",
      "ff02::1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "64:ff9b::a00:1",
      "2002:c0a8:101::1",
      "2001:db8::1",
      "not-an-address",
      "1.2.3",
    ]
  ) assert.equal(isPublicAddress(address), false, address);
  for (
    const address of [
      "93.184.216.34",
      "8.8.8.8",
      "172.32.0.1",
      "100.128.0.1",
      "2606:4700:4700::1111",
      "::ffff:8.8.8.8",
      "64:ff9b::808:808",
    ]
  ) assert.equal(isPublicAddress(address), true, address);
});

Deno.test("parseDestinationUrl: https without credentials, no private literal or internal name", () => {
  assert.equal(
    parseDestinationUrl("https://hooks.example.com/x", false).hostname,
    "hooks.example.com",
  );
  for (
    const url of [
      "http://hooks.example.com/",
      "https://127.0.0.1/",
      "https://[::1]:8443/",
      "https://localhost/",
      "https://api.localhost/",
      "https://metadata/",
      "https://metadata.google.internal/",
      "https://printer.local/",
      "https://a:b@hooks.example.com/",
      "javascript:alert(1)",
      "/relative",
    ]
  ) {
    assert.throws(
      () => parseDestinationUrl(url, false),
      (err) => err instanceof DomainError && err.kind === "invalid_input",
      url,
    );
  }
  // Development and tests: http and loopback allowed.
  assert.equal(parseDestinationUrl("http://127.0.0.1:9/x", true).port, "9");
  assert.throws(() => parseDestinationUrl("ftp://127.0.0.1/", true), DomainError);
});

Deno.test("assertDeliverable: every address the host resolves to must be public", async () => {
  const resolving = (addresses: string[]) => () => Promise.resolve(addresses);
  await assertDeliverable("https://hooks.example.com/", false, resolving(["93.184.216.34"]));
  await assert.rejects(
    assertDeliverable(
      "https://hooks.example.com/",
      false,
      resolving(["93.184.216.34", "10.0.0.5"]),
    ),
    /resolves to 10\.0\.0\.5/,
  );
  await assert.rejects(
    assertDeliverable("https://rebound.example.com/", false, resolving(["169.254.169.254"])),
    /not a public address/,
  );
  await assert.rejects(
    assertDeliverable("https://nowhere.example.com/", false, resolving([])),
    /does not resolve/,
  );
  // No lookup at all when private addresses are allowed.
  await assertDeliverable(
    "http://anything.test/",
    true,
    () => Promise.reject(new Error("looked up")),
  );
});
