import assert from "node:assert/strict";
import { newSigningSecret, signatureHeader } from "../../../lib/audiences/webhook_signature.ts";
import { documentedVerifier } from "./webhook_receiver.ts";

Deno.test("signatureHeader: Stripe's t=,v1= over '<t>.<body>', verified by the documented snippet", async () => {
  const verify = await documentedVerifier();
  const secret = newSigningSecret();
  assert.match(secret, /^whsec_[A-Za-z0-9_-]{43}$/);
  assert.notEqual(secret, newSigningSecret());
  const body = '{"destination":"dst_1","deliveries":[{"id":"é"}]}';
  const at = new Date();
  const header = await signatureHeader(secret, body, at);
  assert.match(header, /^t=\d+,v1=[0-9a-f]{64}$/);
  assert.equal(header.split(",")[0], `t=${Math.floor(at.getTime() / 1000)}`);
  assert.equal(await verify(secret, body, header), true);
  assert.equal(await verify(secret, `${body} `, header), false);
  assert.equal(await verify(newSigningSecret(), body, header), false);
  const flipped = header.slice(0, -1) + (header.endsWith("0") ? "1" : "0");
  assert.equal(await verify(secret, body, flipped), false);
  assert.equal(await verify(secret, body, "garbage"), false);
  const old = await signatureHeader(secret, body, new Date(at.getTime() - 600_000));
  assert.equal(await verify(secret, body, old), false, "older than the tolerance");
});

Deno.test("signatureHeader: a v1 per secret, in order; the documented snippet accepts any of them", async () => {
  const verify = await documentedVerifier();
  const [current, previous] = [newSigningSecret(), newSigningSecret()];
  const body = '{"destination":"dst_1","deliveries":[]}';
  const header = await signatureHeader([current, previous], body, new Date());
  assert.match(header, /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
  const [, first] = header.split(",");
  assert.equal(first, (await signatureHeader(current, body, new Date())).split(",")[1]);
  assert.equal(await verify(current, body, header), true);
  assert.equal(await verify(previous, body, header), true);
  assert.equal(await verify(newSigningSecret(), body, header), false);
  assert.equal(await verify(current, `${body} `, header), false);
});
