/**
 * What drives delivery: a timer in every process that runs the forwarder (the service, or
 * `deno task worker`), making a delivery pass (`deliverDue`) every `DESTINATION_POLL_MS`. The
 * timer reads the change log and the deliveries' state in PostgreSQL, so it works whichever
 * ingest queue is configured (Deno KV's queue or the outbox), and on Deno Deploy main.ts's
 * one-minute cron makes a pass too when no instance is alive. A pass that fails (the database
 * is down) is logged and the next one tries again: nothing is lost, since a change leaves the log
 * only by becoming a delivery, and a delivery is done only once a receiver answered 2xx. Before
 * its first pass, the timer seals the signing secrets that rows written before secrets were
 * sealed still hold in plaintext (destination_secret.ts), delivering or not.
 *
 * @module
 */
import { log } from "../log.ts";
import { deliverDue, type DeliveryDeps } from "./delivery.ts";
import { sealPlaintextSecrets } from "./destination_secret.ts";

/** A running delivery timer. */
export interface DeliveryLoop {
  /** Makes a pass now (unless one is running); resolves when it ends. */
  pass(): Promise<void>;
  /** Stops the timer and waits for the pass under way. */
  stop(): Promise<void>;
}

/** Starts making delivery passes every `settings.pollMs`. */
export function startDeliveryLoop(deps: DeliveryDeps): DeliveryLoop {
  let running: Promise<void> | null = null;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let failures = 0;
  let sealed = false;
  const sealOnce = async () => {
    if (sealed) return;
    const count = await sealPlaintextSecrets(deps);
    sealed = true;
    if (count > 0) log("info", "destination signing secrets sealed", { destinations: count });
  };
  const pass = () => {
    running ??= sealOnce().then(() => deliverDue(deps)).then(
      () => void (failures = 0),
      (err) => {
        // One line per outage, then every 100th failed pass.
        if (failures++ % 100 === 0) {
          log("warn", "destination delivery pass failed; retrying", { error: String(err) });
        }
      },
    ).finally(() => {
      running = null;
    });
    return running;
  };
  const tick = async () => {
    await pass();
    if (!stopped) timer = setTimeout(tick, deps.settings.pollMs);
  };
  timer = setTimeout(tick, 0);
  return {
    pass,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
