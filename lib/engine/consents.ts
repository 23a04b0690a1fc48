/**
 * Consents as Apache Unomi 2.7 keeps them: a `consents` map on the profile, by type identifier,
 * of `{scope, typeIdentifier, status, statusDate, revokeDate}`, maintained by `modifyConsent`
 * events (`properties.consent`). A GRANTED or DENIED consent replaces the type's entry; REVOKED
 * removes it (Unomi's `Profile.setConsent`). Events may arrive out of order: an entry is replaced
 * or removed only by a consent whose `statusDate` is not older than the stored one's.
 *
 * @module
 */

/** One consent as stored. */
/** A consent's type identifier (Unomi's `typeIdentifier`): its key in a profile's `consents`. */
export const CONSENT_TYPE_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$/;

export interface Consent {
  scope: string;
  typeIdentifier: string;
  status: "GRANTED" | "DENIED";
  statusDate: string;
  revokeDate: string | null;
}

const _RESERVED = new Set(["__proto__", "constructor", "prototype"]);

/** A date the event gave, as an ISO instant; null when absent or unreadable. */
function _date(value: unknown): string | null {
  if (typeof value !== "string" && typeof value !== "number") return null;
  const time = new Date(value).getTime();
  return Number.isNaN(time) ? null : new Date(time).toISOString();
}

/**
 * The consents after a `modifyConsent` event's properties (`statusDate` defaults to the event's
 * time, the scope is the credential's), or null when nothing changes.
 */
export function applyConsent(
  consents: Readonly<Record<string, Consent>>,
  properties: Record<string, unknown>,
  scope: string,
  timeStamp: string,
): Record<string, Consent> | null {
  const given = properties.consent as Record<string, unknown> | undefined;
  const typeIdentifier = given?.typeIdentifier;
  const status = given?.status;
  if (typeof typeIdentifier !== "string" || typeof status !== "string") return null;
  // Kept as a plain object's key: names that would reach its prototype are not.
  if (_RESERVED.has(typeIdentifier)) return null;
  const statusDate = _date(given!.statusDate) ?? timeStamp;
  const stored = Object.hasOwn(consents, typeIdentifier) ? consents[typeIdentifier] : undefined;
  if (stored && Date.parse(stored.statusDate) > Date.parse(statusDate)) return null;
  const next = { ...consents };
  if (status === "REVOKED") {
    if (!stored) return null;
    delete next[typeIdentifier];
    return next;
  }
  if (status !== "GRANTED" && status !== "DENIED") return null;
  next[typeIdentifier] = {
    scope,
    typeIdentifier,
    status,
    statusDate,
    revokeDate: _date(given!.revokeDate),
  };
  return next;
}

/** A merge's consents: the survivor's entries win, the absorbed profile's fill the gaps. */
export function mergeConsents(
  keep: Readonly<Record<string, Consent>>,
  absorbed: Readonly<Record<string, Consent>>,
): Record<string, Consent> {
  return { ...absorbed, ...keep };
}
