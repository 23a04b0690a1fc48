import assert from "node:assert/strict";
import { applyConsent, type Consent, mergeConsents } from "../../../lib/engine/consents.ts";

const SCOPE = "acme.myshopify.com";
const T = "2026-11-21T12:00:00.000Z";
const consent = (status: string, extra: Record<string, unknown> = {}) => ({
  consent: { typeIdentifier: "newsletter", status, ...extra },
});

Deno.test("applyConsent: GRANTED and DENIED set the type's entry as Unomi stores it", () => {
  const granted = applyConsent({}, consent("GRANTED", { revokeDate: "2027-01-01" }), SCOPE, T);
  assert.deepEqual(granted, {
    newsletter: {
      scope: SCOPE,
      typeIdentifier: "newsletter",
      status: "GRANTED",
      statusDate: T,
      revokeDate: "2027-01-01T00:00:00.000Z",
    },
  });
  const denied = applyConsent(
    granted!,
    consent("DENIED", { statusDate: "2026-11-22T00:00:00Z" }),
    SCOPE,
    T,
  );
  assert.equal(denied!.newsletter!.status, "DENIED");
  assert.equal(denied!.newsletter!.statusDate, "2026-11-22T00:00:00.000Z");
  assert.equal(denied!.newsletter!.revokeDate, null);
});

Deno.test("applyConsent: REVOKED removes the entry; an older consent changes nothing", () => {
  const stored: Record<string, Consent> = {
    newsletter: {
      scope: SCOPE,
      typeIdentifier: "newsletter",
      status: "GRANTED",
      statusDate: T,
      revokeDate: null,
    },
  };
  assert.deepEqual(applyConsent(stored, consent("REVOKED"), SCOPE, T), {});
  assert.equal(applyConsent({}, consent("REVOKED"), SCOPE, T), null);
  assert.equal(
    applyConsent(stored, consent("DENIED", { statusDate: "2026-01-01T00:00:00Z" }), SCOPE, T),
    null,
  );
  for (
    const bad of [{}, { consent: { status: "GRANTED" } }, consent("MAYBE"), {
      consent: { typeIdentifier: "__proto__", status: "GRANTED" },
    }]
  ) {
    assert.equal(applyConsent(stored, bad, SCOPE, T), null, JSON.stringify(bad));
  }
});

Deno.test("mergeConsents: the survivor's entries win", () => {
  const a = { x: { status: "GRANTED" } as Consent };
  const b = { x: { status: "DENIED" } as Consent, y: { status: "DENIED" } as Consent };
  assert.deepEqual(mergeConsents(a, b), { x: a.x, y: b.y });
});
