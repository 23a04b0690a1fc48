/**
 * Where a destination may point: an `https` URL whose host resolves only to public addresses (no
 * loopback, private, carrier-grade NAT, link-local, cloud metadata, multicast, documentation or
 * reserved ranges). Checked when a destination is saved (the URL's shape, and a literal address)
 * and again before every POST (the name's current addresses), so a name later pointed at an
 * internal address is refused then. `allowPrivate` (DESTINATIONS_ALLOW_PRIVATE=true, development
 * and tests) allows `http` and any address.
 *
 * @module
 */
import { DomainError } from "../errors.ts";

/** Host names refused whatever they resolve to. */
const _BLOCKED_NAMES = /(^|\.)(localhost|internal|local)$|^metadata(\.google\.internal)?$/i;

/** The URL's shape as a destination: http(s), no credentials; `invalid_input` otherwise. */
export function parseDestinationUrl(text: string, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new DomainError("invalid_input", "url: not an absolute URL");
  }
  if (url.protocol !== "https:" && !(allowPrivate && url.protocol === "http:")) {
    throw new DomainError("invalid_input", "url: must be https");
  }
  if (url.username || url.password) {
    throw new DomainError("invalid_input", "url: must not carry credentials");
  }
  if (!allowPrivate) {
    const host = _bareHost(url.hostname);
    if (_BLOCKED_NAMES.test(host) || (_isAddress(host) && !isPublicAddress(host))) {
      throw new DomainError("invalid_input", "url: must point at a public address");
    }
  }
  return url;
}

/** How a host name resolves (Deno.resolveDns by default; tests pass their own). */
export type Resolver = (host: string) => Promise<string[]>;

/** Both address families of `host` through DNS. */
export const dnsResolver: Resolver = async (host) => {
  const found = await Promise.allSettled([
    Deno.resolveDns(host, "A"),
    Deno.resolveDns(host, "AAAA"),
  ]);
  return found.flatMap((r) => r.status === "fulfilled" ? r.value : []);
};

/**
 * Checks, right before a POST, that the URL may be called now: its shape, then every address its
 * host resolves to. Throws an Error saying why not (the delivery's `last_error`).
 */
export async function assertDeliverable(
  text: string,
  allowPrivate: boolean,
  resolve: Resolver = dnsResolver,
): Promise<void> {
  const url = parseDestinationUrl(text, allowPrivate);
  if (allowPrivate) return;
  const host = _bareHost(url.hostname);
  const addresses = _isAddress(host) ? [host] : await resolve(host);
  if (addresses.length === 0) throw new Error(`${host} does not resolve`);
  const refused = addresses.find((address) => !isPublicAddress(address));
  if (refused) throw new Error(`${host} resolves to ${refused}, which is not a public address`);
}

function _bareHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "");
}

function _isAddress(host: string): boolean {
  return _ipv4(host) !== null || host.includes(":");
}

/** Whether an IPv4 or IPv6 address is publicly routable (false for anything unparsable). */
export function isPublicAddress(address: string): boolean {
  const v4 = _ipv4(address);
  if (v4 !== null) return _publicV4(v4);
  const v6 = _ipv6(address);
  return v6 !== null && _publicV6(v6);
}

// [network, prefix length] of the IPv4 ranges that are not public.
const _V4_BLOCKED: [number, number][] = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, the cloud metadata address 169.254.169.254 among them
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
].map(([net, bits]) => [_ipv4(net as string)!, bits as number]);

function _publicV4(address: number): boolean {
  return !_V4_BLOCKED.some(([net, bits]) => (address >>> (32 - bits)) === (net >>> (32 - bits)));
}

function _ipv4(text: string): number | null {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) {
    return null;
  }
  return parts.reduce((acc, p) => acc * 256 + Number(p), 0) >>> 0;
}

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 included), or null. */
function _ipv6(text: string): number[] | null {
  let body = text.toLowerCase().replace(/%.*$/, "");
  const dotted = body.match(/^(.*:)(\d+\.\d+\.\d+\.\d+)$/);
  if (dotted) {
    const v4 = _ipv4(dotted[2]!);
    if (v4 === null) return null;
    body = `${dotted[1]}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = body.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...Array(halves.length === 2 ? missing : 0).fill("0"), ...tail];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return null;
  return groups.map((g) => parseInt(g, 16));
}

function _publicV6(g: number[]): boolean {
  const v4 = ((g[6]! << 16) | g[7]!) >>> 0;
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(8) || (zeroUpTo(7) && g[7] === 1)) return false; // :: and ::1
  if (zeroUpTo(5) && g[5] === 0xffff) return _publicV4(v4); // IPv4-mapped
  if (zeroUpTo(6)) return _publicV4(v4); // IPv4-compatible (deprecated)
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return _publicV4(v4); // NAT64
  if ((g[0]! & 0xfe00) === 0xfc00) return false; // unique local, fd00:ec2::254 among them
  if ((g[0]! & 0xffc0) === 0xfe80) return false; // link-local
  if ((g[0]! & 0xff00) === 0xff00) return false; // multicast
  if (g[0] === 0x2001 && g[1] === 0x0db8) return false; // documentation
  if (g[0] === 0x2002) return _publicV4(((g[1]! << 16) | g[2]!) >>> 0); // 6to4
  return true;
}
