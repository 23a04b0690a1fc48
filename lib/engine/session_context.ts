/**
 * A session's properties from the request context of an event (`properties.context`, in
 * Segment's context shape: `{page: {url, path, search, referrer, title}, userAgent, locale, ip,
 * campaign: {name, source, medium, term, content}, library}`), under Apache Unomi 2.7's session
 * property names where Unomi has one: the landing page, the referrer, the UTM campaign fields,
 * the browser, operating system and device category parsed from the user agent. Nothing is
 * derived from the IP address. The names are listed in docs/integrations.md ("Sessions").
 *
 * @module
 */

/** The session properties a context gives (only those it holds are present). */
export interface SessionProperties {
  /** The page the session began on (`context.page.url`). */
  landingPageURL?: string;
  landingPagePath?: string;
  /** Unomi's name (its built-in `sessionReferrer` rule sets it): `context.page.referrer`. */
  referringURL?: string;
  utmSource?: string;
  utmMedium?: string;
  utmCampaign?: string;
  utmTerm?: string;
  utmContent?: string;
  userAgentName?: string;
  userAgentVersion?: string;
  /** Unomi's `name@@version`. */
  userAgentNameAndVersion?: string;
  operatingSystemName?: string;
  /** `desktop`, `mobile` or `tablet`. */
  deviceCategory?: string;
  locale?: string;
}

// Longer than any real value is kept out: a session is read by every session condition.
const _MAX_TEXT = 2_000;

/**
 * The session properties of an event's `properties.context`, or null when it has none (no
 * context object, or nothing usable in it).
 */
export function sessionPropertiesOf(properties: unknown): SessionProperties | null {
  const context = _record(_record(properties)?.context);
  if (!context) return null;
  const out: SessionProperties = {};
  const page = _record(context.page);
  const url = _text(page?.url);
  if (url) out.landingPageURL = url;
  const path = _text(page?.path) ?? (url ? _parseUrl(url)?.pathname : undefined);
  if (path) out.landingPagePath = path;
  const referrer = _text(page?.referrer);
  if (referrer) out.referringURL = referrer;
  Object.assign(out, _campaign(context.campaign, url, _text(page?.search)));
  const userAgent = _text(context.userAgent);
  if (userAgent) Object.assign(out, parseUserAgent(userAgent));
  const locale = _text(context.locale);
  if (locale) out.locale = locale;
  return Object.keys(out).length > 0 ? out : null;
}

const _UTM = [
  ["utmSource", "source", "utm_source"],
  ["utmMedium", "medium", "utm_medium"],
  ["utmCampaign", "name", "utm_campaign"],
  ["utmTerm", "term", "utm_term"],
  ["utmContent", "content", "utm_content"],
] as const;

// The UTM fields from `context.campaign`; without it, from the landing page's query (analytics.js
// fills campaign from it, a server-side client or a pixel may not).
function _campaign(raw: unknown, url: string | undefined, search: string | undefined) {
  const out: Partial<Record<(typeof _UTM)[number][0], string>> = {};
  const campaign = _record(raw);
  if (campaign) {
    for (const [name, key] of _UTM) {
      const value = _text(campaign[key]);
      if (value) out[name] = value;
    }
    return out;
  }
  const query = search !== undefined
    ? new URLSearchParams(search)
    : url
    ? _parseUrl(url)?.searchParams
    : undefined;
  if (!query) return out;
  for (const [name, , param] of _UTM) {
    const value = _text(query.get(param) ?? undefined);
    if (value) out[name] = value;
  }
  return out;
}

// Browsers by their product token, most specific first: Edge, Opera and Samsung Internet also
// say "Chrome" and "Safari", Chrome also says "Safari".
const _BROWSERS: [RegExp, string][] = [
  [/\bEdg(?:e|A|iOS)?\/([\d.]+)/, "Edge"],
  [/\bOPR\/([\d.]+)/, "Opera"],
  [/\bSamsungBrowser\/([\d.]+)/, "Samsung Internet"],
  [/\b(?:Firefox|FxiOS)\/([\d.]+)/, "Firefox"],
  [/\bHeadlessChrome\/([\d.]+)/, "Headless Chrome"],
  [/\b(?:Chrome|CriOS)\/([\d.]+)/, "Chrome"],
  [/\bVersion\/([\d.]+).*\bSafari\//, "Safari"],
  [/\bMSIE ([\d.]+)/, "Internet Explorer"],
  [/\bTrident\/.*\brv:([\d.]+)/, "Internet Explorer"],
];

const _SYSTEMS: [RegExp, string][] = [
  [/\bWindows Phone\b/, "Windows Phone"],
  [/\bWindows\b/, "Windows"],
  [/\b(?:iPhone|iPad|iPod)\b/, "iOS"],
  [/\bAndroid\b/, "Android"],
  [/\bCrOS\b/, "Chrome OS"],
  [/\bMac OS X\b|\bMacintosh\b/, "macOS"],
  [/\bLinux\b/, "Linux"],
];

/**
 * The browser name and version, the operating system and the device category (`desktop`,
 * `mobile`, `tablet`) of a User-Agent string, by its tokens; what it does not recognize is
 * left out. An iPad asking for the desktop site says "Macintosh" and counts as a desktop.
 */
export function parseUserAgent(userAgent: string): SessionProperties {
  const out: SessionProperties = {};
  for (const [pattern, name] of _BROWSERS) {
    const match = userAgent.match(pattern);
    if (!match) continue;
    out.userAgentName = name;
    out.userAgentVersion = match[1]!;
    out.userAgentNameAndVersion = `${name}@@${match[1]!}`;
    break;
  }
  const system = _SYSTEMS.find(([pattern]) => pattern.test(userAgent));
  if (system) out.operatingSystemName = system[1];
  out.deviceCategory = deviceCategory(userAgent);
  return out;
}

/** `tablet`, `mobile` or `desktop`, by the User-Agent's device tokens. */
export function deviceCategory(userAgent: string): "desktop" | "mobile" | "tablet" {
  const android = /\bAndroid\b/.test(userAgent);
  if (/\biPad\b|\bTablet\b|\bKindle\b|\bSilk\//.test(userAgent)) return "tablet";
  if (android && !/\bMobile\b/.test(userAgent)) return "tablet";
  if (/\bMobi|\biPhone\b|\biPod\b|\bWindows Phone\b/.test(userAgent)) return "mobile";
  return "desktop";
}

function _record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}

function _text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" && value.length <= _MAX_TEXT ? value : undefined;
}

function _parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}
