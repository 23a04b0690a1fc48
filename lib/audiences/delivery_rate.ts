/**
 * The per-brand cap on delivery POSTs (`DESTINATION_RATE_LIMIT_PER_MINUTE`, over all of a brand's
 * destinations, tests and retries included), counted in KV per one-minute window so that every
 * delivering process shares it. A POST over the cap waits for a later pass: nothing is dropped.
 *
 * @module
 */
import { destinationRateKey } from "../store/kv_keys.ts";

/** Takes one POST of the brand's minute; false when the minute's cap is reached (or contended). */
export async function takeDeliverySlot(
  kv: Deno.Kv,
  brandId: string,
  now: Date,
  perMinute: number,
): Promise<boolean> {
  const key = destinationRateKey(brandId, Math.floor(now.getTime() / 60_000));
  for (let attempt = 0; attempt < 3; attempt++) {
    const current = await kv.get<number>(key);
    const used = current.value ?? 0;
    if (used >= perMinute) return false;
    const committed = await kv.atomic().check(current).set(key, used + 1, { expireIn: 120_000 })
      .commit();
    if (committed.ok) return true;
  }
  return false;
}
