/**
 * The ingest port ({@linkcode IngestQueue}) and Deno KV's queue behind it; what both queues share
 * (packing batches into messages, the backlog bound `INGEST_MAX_BACKLOG` and its accounting,
 * stored-size bounds), and the dead letters an operator lists and replays (docs/operations.md).
 * The outbox for Deno Deploy is outbox.ts.
 *
 * @module
 */
import type { Engine, EventBatch, IngestEvent } from "../engine/engine.ts";
import {
  deadLetterKey,
  deadLetterPrefix,
  ingestBacklogCounterKey,
  ingestBacklogMarkerKey,
  ingestBacklogUndeliveredKey,
  ingestBacklogUndeliveredPrefix,
} from "../store/kv_keys.ts";
import { DomainError } from "../errors.ts";
import { type Batcher, createBatcher } from "../store/batcher.ts";

/** A queue message carrying events for the engine. */
export interface EventsMessage {
  kind: "events";
  id: string;
  brandId: string;
  batch: EventBatch;
}

/** A message the forwarder gave up on, kept for an operator (`deadletter list` / `replay`). */
export interface DeadLetter {
  id: string;
  message: EventsMessage;
  /** Why: a permanent engine rejection, or retries exhausted. */
  reason: string;
  failedAt: string | null;
}

// Deno KV refuses queue messages over 64 KiB (V8-serialized); leave room for the envelope.
const _MESSAGE_BUDGET = 60_000;
/** The largest event (V8-serialized) that fits one queue message with its envelope. */
export const MAX_STORED_EVENT_BYTES = _MESSAGE_BUDGET;

/** Retry delays (ms) of a message whose handler throws; then it goes to its dead-letter key. */
export const DEFAULT_BACKOFF_MS = [1_000, 5_000, 30_000, 120_000, 600_000];

/**
 * Splits events into chunks whose serialized size stays under the queue's message limit.
 * `sizes[i]`, when given, is `storedSizeBound(events[i])` already computed by the caller.
 */
export function chunkEvents(events: IngestEvent[], sizes?: number[]): IngestEvent[][] {
  const chunks: IngestEvent[][] = [];
  let current: IngestEvent[] = [];
  let size = 0;
  for (const [i, event] of events.entries()) {
    const eventSize = sizes?.[i] ?? storedSizeBound(event);
    if (current.length > 0 && size + eventSize > _MESSAGE_BUDGET) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(event);
    size += eventSize;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** A batch for the queue: a brand's events of one scope and source. */
export interface QueueBatch {
  brandId: string;
  batch: EventBatch;
  /** `storedSizeBound` of each event, when the caller has it. */
  sizes?: number[];
  /** Other writes (a request's limiter counts and usage record) for the same KV commit. */
  also?: (op: Deno.AtomicOperation) => void;
}

/** How a message is written besides its value (Deno KV's own `enqueue` options). */
export interface SendOptions {
  /** Writes and checks of the caller's, committed with the message (or refused with it). */
  with?: (op: Deno.AtomicOperation) => void;
  delay?: number;
  keysIfUndelivered?: Deno.KvKey[];
  backoffSchedule?: number[];
}

/**
 * The ingest port: where accepted events wait for the forwarder. Two implementations, chosen at
 * start (`INGEST_QUEUE`): Deno KV's own queue ({@linkcode createKvQueue}) and the outbox of plain
 * KV entries for a KV database that does not deliver queue messages (outbox.ts). Both keep the
 * backlog, the dead letters and the counters in {@linkcode IngestQueue.kv}.
 */
export interface IngestQueue {
  readonly kind: "kv" | "outbox";
  /** The KV database holding the queue, its backlog counters and its dead letters. */
  readonly kv: Deno.Kv;
  /**
   * Accepts a batch: admitted under the backlog bound, then queued in one atomic KV commit with
   * its `also` writes (either every event is queued or none is). Throws `queue_full` (the
   * backlog is at its bound) or `service_unavailable` (the commit failed); nothing is queued then.
   */
  accept(input: QueueBatch): Promise<void>;
  /** Queues one message (a job) in a commit of its own with `options.with`; false if refused. */
  send(message: unknown, options?: SendOptions): Promise<boolean>;
  /**
   * Delivers every message to `handler` (at least once; a throw retries it on its backoff) until
   * the queue stops or its KV database closes. `wakeMs`: see {@linkcode createKvQueue}.
   */
  consume(
    handler: (message: unknown) => Promise<void> | void,
    options?: { wakeMs?: number },
  ): Promise<void>;
  /** Queued events not yet done, read now ({@linkcode readBacklog}). */
  backlog(): Promise<number>;
  /** The backlog as this process sees it: cached, plus its own admissions since. */
  estimatedBacklog(): Promise<number>;
  /** Counts finished messages (applied or dead-lettered) out of the backlog; idempotent. */
  retire(messageIds: string[]): Promise<void>;
  /** Resolves once nothing is ready to deliver (at once when not consuming). */
  drained(): Promise<void>;
  /**
   * Stops consuming: the outbox's `consume` ends at once (deliveries in flight are not awaited),
   * Deno KV's when its database closes.
   */
  stop(): void;
}

/** What every queue is built with. */
export interface IngestQueueOptions {
  /** Ids of messages (time-ordered). */
  newId: () => string;
  /** Retry delays of an events message (default {@linkcode DEFAULT_BACKOFF_MS}). */
  backoffMs?: number[];
  /** Events queued at most (`INGEST_MAX_BACKLOG`); `accept` refuses past it (default none). */
  maxBacklog?: number;
}

/** Seconds a client told `queue_full` waits before it retries. */
export const QUEUE_FULL_RETRY_AFTER_SECONDS = 5;

/**
 * What both queues share: the backlog bound and accounting, and the accepts' KV commits on the
 * batching layer (lib/store/batcher.ts). Concurrent `accept`s wait while a commit is under way;
 * the next commit takes them together and packs their events, per brand, scope and source, into
 * as few messages as fit the message size limit (a packed batch's `receivedAt` is its earliest).
 * A file-backed KV store delivers a bounded number of messages a second whatever their size, and
 * each commit costs far more than its mutations, so packing is what lets the forwarder keep up
 * with the edge. Should a shared commit fail, each request's batch comes back as a commit of its
 * own (the batching layer's one failure path; safe on the local SQLite KV, where a failed commit
 * wrote nothing), so one request's problem is never its neighbours'. The implementations say how
 * a message is written and read.
 */
export abstract class KvBackedQueue implements IngestQueue {
  abstract readonly kind: "kv" | "outbox";
  readonly kv: Deno.Kv;
  protected readonly newId: () => string;
  readonly #backoffMs: number[];
  readonly #maxBacklog: number;
  readonly #gate: BacklogGate;
  readonly #pack: Batcher<QueueBatch>;

  constructor(kv: Deno.Kv, options: IngestQueueOptions) {
    this.kv = kv;
    this.newId = options.newId;
    this.#backoffMs = options.backoffMs ?? DEFAULT_BACKOFF_MS;
    this.#maxBacklog = options.maxBacklog ?? Infinity;
    this.#gate = new BacklogGate(kv);
    this.#pack = createBatcher({
      maxItems: _PACK_REQUESTS,
      maxWeight: _PACK_BYTES,
      weight: _bytesOf,
      // While messages wait for delivery, fuller ones drain the queue faster than a commit made
      // at once would. An idle queue commits a lone request at once.
      linger: (waiting) =>
        waiting < _PACK_REQUESTS && this.#gate.peek() >= _LINGER_BACKLOG ? _PACK_LINGER_MS : 0,
      commit: (inputs) => this.#commit(inputs),
    });
  }

  /** Adds `message` to `op` the way this queue stores messages. */
  protected abstract write(op: Deno.AtomicOperation, message: unknown, options: SendOptions): void;
  /** Called after a commit that wrote messages landed. */
  protected abstract written(): void;
  abstract consume(
    handler: (message: unknown) => Promise<void> | void,
    options?: { wakeMs?: number },
  ): Promise<void>;
  abstract drained(): Promise<void>;
  abstract stop(): void;

  async accept(input: QueueBatch): Promise<void> {
    const count = input.batch.events.length;
    if (count === 0) return;
    let ticket: BacklogTicket | null = null;
    try {
      ticket = await this.#gate.admit(count, this.#maxBacklog);
      if (ticket) {
        await this.#pack(input);
        ticket.settle(true);
        return;
      }
    } catch (err) {
      ticket?.settle(false);
      throw new DomainError(
        "service_unavailable",
        "the ingest queue is unavailable; no events were accepted, retry the batch",
        { cause: err },
      );
    }
    throw new DomainError(
      "queue_full",
      `the ingest queue holds ${this.#maxBacklog} or more events; no events were accepted, ` +
        `retry the batch after ${QUEUE_FULL_RETRY_AFTER_SECONDS}s`,
      { retryAfterSeconds: QUEUE_FULL_RETRY_AFTER_SECONDS },
    );
  }

  async send(message: unknown, options: SendOptions = {}): Promise<boolean> {
    const op = this.kv.atomic();
    options.with?.(op);
    this.write(op, message, options);
    const result = await op.commit();
    if (result.ok) this.written();
    return result.ok;
  }

  backlog(): Promise<number> {
    return readBacklog(this.kv);
  }

  estimatedBacklog(): Promise<number> {
    return this.#gate.estimate();
  }

  async retire(messageIds: string[]): Promise<void> {
    if (messageIds.length === 1) await retireBacklogMessage(this.kv, messageIds[0]!);
    else if (messageIds.length > 1) await retireBacklogMessages(this.kv, messageIds);
  }

  /** Commits the given requests' writes and their events packed into messages. */
  async #commit(inputs: QueueBatch[]): Promise<void> {
    const op = this.kv.atomic();
    for (const input of inputs) input.also?.(op);
    let total = 0;
    for (const message of packMessages(inputs, this.newId)) {
      total += message.batch.events.length;
      op.set(ingestBacklogMarkerKey(message.id), message.batch.events.length);
      this.write(op, message, {
        keysIfUndelivered: [deadLetterKey(message.id), ingestBacklogUndeliveredKey(message.id)],
        backoffSchedule: this.#backoffMs,
      });
    }
    if (total > 0) op.sum(ingestBacklogCounterKey("enqueued"), BigInt(total));
    const result = await op.commit();
    // Only a check can refuse a commit, and these writes carry none.
    if (!result.ok) throw new Error("ingest queue commit was refused");
    this.written();
  }
}

/** What Deno KV's own queue is built with besides {@linkcode IngestQueueOptions}. */
export interface KvQueueOptions extends IngestQueueOptions {
  /** Opens the queue's KV file again (a local file only): see {@linkcode createKvQueue}. */
  reopen?: () => Promise<Deno.Kv>;
}

/** Deno KV's own queue (`INGEST_QUEUE=kv`), the default beside a local KV file. */
class _KvQueue extends KvBackedQueue {
  readonly kind = "kv" as const;
  #stopped = false;
  readonly #reopen: (() => Promise<Deno.Kv>) | undefined;

  constructor(kv: Deno.Kv, options: KvQueueOptions) {
    super(kv, options);
    this.#reopen = options.reopen;
  }

  protected write(op: Deno.AtomicOperation, message: unknown, options: SendOptions): void {
    op.enqueue(message, {
      delay: options.delay,
      keysIfUndelivered: options.keysIfUndelivered,
      backoffSchedule: options.backoffSchedule,
    });
  }

  protected written(): void {}

  consume(
    handler: (message: unknown) => Promise<void> | void,
    options: { wakeMs?: number } = {},
  ): Promise<void> {
    const listening = this.kv.listenQueue((message) => {
      if ((message as { kind?: unknown })?.kind === _WAKE.kind) return;
      return handler(message);
    });
    const reopen = this.#reopen;
    const reclaim = reopen && setTimeout(() => this.#reclaimHeld(reopen), _HELD_MS);
    const wake = options.wakeMs !== undefined &&
      setInterval(() => this.#wake(), options.wakeMs);
    return listening.finally(() => {
      if (reclaim) clearTimeout(reclaim);
      if (wake) clearInterval(wake);
    });
  }

  /**
   * Hands back the messages a crashed process held. Deno KV's SQLite backend returns a message
   * whose holder stopped renewing it when a handle on the file opens, or at the open handles'
   * once-a-minute cleanup; a service restarted right after a `kill -9` opens the file before the
   * dead process's hold lapses, so without this its messages would wait for that cleanup. A second
   * handle opened once the hold has lapsed does the returning; the wake-up then has this
   * listener look again. A failure only leaves the messages to the minute's cleanup.
   */
  async #reclaimHeld(reopen: () => Promise<Deno.Kv>): Promise<void> {
    try {
      const other = await reopen();
      try {
        // Answered only after the handle's opening pass over held messages.
        await other.get(ingestBacklogCounterKey("enqueued"));
      } finally {
        other.close();
      }
      this.#wake();
    } catch { /* the minute's cleanup returns them */ }
  }

  #wake(): void {
    // A failed wake-up (the store closing) only delays delivery until the next one.
    if (!this.#stopped) this.kv.enqueue(_WAKE).catch(() => {});
  }

  drained(): Promise<void> {
    return Promise.resolve();
  }

  stop(): void {
    // Deno KV's listener ends only when its database closes.
    this.#stopped = true;
  }
}

const _WAKE = { kind: "wake" } as const;

/**
 * How long after it starts consuming a queue reclaims the messages a crashed process held: Deno
 * KV's SQLite backend holds a message for 5 s past its holder's last renewal.
 */
const _HELD_MS = 6_000;

/**
 * The ingest queue on Deno KV's own queue. `consume(handler, { wakeMs })` also enqueues a
 * wake-up message every `wakeMs`: Deno KV's SQLite backend wakes a listener only for its own
 * process's enqueues, so a forwarder in a process of its own would otherwise not see the
 * service's messages for minutes. With `reopen`, a consumer also reclaims, once, the messages a
 * crashed process held when it died (a restart after `kill -9`), seconds after it starts instead
 * of at the backend's once-a-minute cleanup.
 */
export function createKvQueue(kv: Deno.Kv, options: KvQueueOptions): IngestQueue {
  return new _KvQueue(kv, options);
}

/** Bounds of one packed commit: requests, and their events' stored size. */
const _PACK_REQUESTS = 64;
const _PACK_BYTES = 384 * 1024;

/**
 * How long a pack waits for more requests while the queue is backlogged, and the backlog (queued
 * events, as this process sees it) from which it does.
 */
const _PACK_LINGER_MS = 5;
const _LINGER_BACKLOG = 2_000;

function _bytesOf(input: QueueBatch): number {
  return input.sizes?.reduce((sum, size) => sum + size, 0) ??
    input.batch.events.reduce((sum, event) => sum + storedSizeBound(event), 0);
}

/**
 * The messages of the given batches: per brand, scope and source, their events in as few
 * messages as fit the queue's size limit ({@linkcode chunkEvents}).
 */
export function packMessages(inputs: QueueBatch[], newId: () => string): EventsMessage[] {
  const groups = new Map<
    string,
    { inputs: QueueBatch[]; events: IngestEvent[]; sizes: number[] }
  >();
  for (const input of inputs) {
    const { scope, source } = input.batch;
    const key = JSON.stringify([input.brandId, scope, source, input.batch.checked ?? null]);
    let group = groups.get(key);
    if (!group) groups.set(key, group = { inputs: [], events: [], sizes: [] });
    group.inputs.push(input);
    group.events.push(...input.batch.events);
    group.sizes.push(
      ...(input.sizes ?? input.batch.events.map((event) => storedSizeBound(event))),
    );
  }
  const messages: EventsMessage[] = [];
  for (const { inputs: members, events, sizes } of groups.values()) {
    const first = members[0]!;
    const receivedAt = members.map((i) => i.batch.receivedAt).reduce((a, b) => a < b ? a : b);
    for (const chunk of chunkEvents(events, sizes)) {
      messages.push({
        kind: "events",
        id: newId(),
        brandId: first.brandId,
        batch: { ...first.batch, receivedAt, events: chunk },
      });
    }
  }
  return messages;
}

/**
 * Queued events not yet done: the `enqueued` total less the `done` total, read in one snapshot.
 * Deno KV tells no queue depth, so the service counts: each enqueue writes a marker per message
 * and adds its events to `enqueued`; finishing a message deletes its marker and adds the same
 * count to `done`, under a check of the marker, so a redelivered message is never counted twice
 * ({@linkcode retireBacklogMessage}). A message KV gives up on leaves its marker; the undelivered
 * key KV writes beside its dead letter lets {@linkcode retireUndelivered} retire it.
 */
export async function readBacklog(kv: Deno.Kv): Promise<number> {
  const [enqueued, done] = await kv.getMany<[Deno.KvU64, Deno.KvU64]>([
    ingestBacklogCounterKey("enqueued"),
    ingestBacklogCounterKey("done"),
  ]);
  const backlog = (enqueued.value?.value ?? 0n) - (done.value?.value ?? 0n);
  return backlog > 0n ? Number(backlog) : 0;
}

/**
 * Counts a finished message (applied, or dead-lettered by the forwarder) out of the backlog.
 * Idempotent: only the call that deletes the marker adds to `done`. False when already retired.
 */
export async function retireBacklogMessage(kv: Deno.Kv, messageId: string): Promise<boolean> {
  const marker = await kv.get<number>(ingestBacklogMarkerKey(messageId));
  if (marker.versionstamp === null) return false;
  const result = await kv.atomic()
    .check(marker)
    .delete(marker.key)
    .sum(ingestBacklogCounterKey("done"), BigInt(marker.value))
    .commit();
  return result.ok;
}

/**
 * {@linkcode retireBacklogMessage} for several messages in one KV commit (a forwarder's group).
 * Each marker is checked; should another delivery retire one meanwhile (the commit is refused),
 * the markers are read again and those still there retired.
 */
export async function retireBacklogMessages(kv: Deno.Kv, messageIds: string[]): Promise<void> {
  // Each refusal means a marker went meanwhile, so this ends within one attempt a message.
  for (let attempt = 0; attempt <= messageIds.length; attempt++) {
    const markers: Deno.KvEntryMaybe<number>[] = [];
    // getMany reads at most ten keys at a time.
    for (let i = 0; i < messageIds.length; i += 10) {
      const keys = messageIds.slice(i, i + 10).map((id) => ingestBacklogMarkerKey(id));
      markers.push(...await kv.getMany<number[]>(keys));
    }
    const live = markers.filter((m): m is Deno.KvEntry<number> => m.versionstamp !== null);
    if (live.length === 0) return;
    const op = kv.atomic();
    let done = 0n;
    for (const marker of live) {
      op.check(marker).delete(marker.key);
      done += BigInt(marker.value);
    }
    if ((await op.sum(ingestBacklogCounterKey("done"), done).commit()).ok) return;
  }
  throw new Error("the backlog markers kept changing; the messages are retired on redelivery");
}

/**
 * Retires the markers of messages KV itself dead-lettered after their retries ran out (it wrote
 * their undelivered keys), and deletes those keys; returns how many it retired.
 */
export async function retireUndelivered(kv: Deno.Kv): Promise<number> {
  let retired = 0;
  for await (const entry of kv.list({ prefix: ingestBacklogUndeliveredPrefix() })) {
    const messageId = String(entry.key[entry.key.length - 1]);
    const marker = await kv.get<number>(ingestBacklogMarkerKey(messageId));
    const op = kv.atomic().check(entry).delete(entry.key);
    if (marker.versionstamp !== null) {
      op.check(marker).delete(marker.key)
        .sum(ingestBacklogCounterKey("done"), BigInt(marker.value));
    }
    // A refused commit (the entry changed meanwhile) is retried by the next sweep.
    if ((await op.commit()).ok && marker.versionstamp !== null) retired++;
  }
  return retired;
}

/** How long one process trusts the backlog it read before reading it again. */
export const BACKLOG_CACHE_MS = 250;
/** How often one process looks for messages KV dead-lettered ({@linkcode retireUndelivered}). */
export const UNDELIVERED_SWEEP_MS = 10_000;

/** Room reserved in the backlog for one request's events; settle it once the enqueue is over. */
export interface BacklogTicket {
  settle(committed: boolean): void;
}

/**
 * The backlog bound of one queue in one process: the backlog is read from KV at most every
 * {@linkcode BACKLOG_CACHE_MS}, plus what the process admitted since; so one process never
 * admits past the bound by more than one batch a request in flight, and other processes'
 * admissions are seen within that interval (docs/operations.md). Now and then a read also
 * retires the messages KV dead-lettered ({@linkcode retireUndelivered}).
 */
export class BacklogGate {
  readonly #kv: Deno.Kv;
  /** The backlog as last read, and when that read started. */
  #backlog = 0;
  #readAt = -Infinity;
  /** Events this process admitted since that read started (or in flight when it did). */
  #added = 0;
  /** Events admitted whose enqueue has not settled yet. */
  #inFlight = 0;
  #reading: Promise<void> | null = null;
  #sweptAt = 0;

  constructor(kv: Deno.Kv) {
    this.#kv = kv;
  }

  /** Admits `events` while the backlog is under `maxBacklog`, else null. */
  async admit(events: number, maxBacklog: number): Promise<BacklogTicket | null> {
    await this.#fresh();
    if (this.#backlog + this.#added >= maxBacklog) return null;
    this.#added += events;
    this.#inFlight += events;
    return {
      settle: (committed) => {
        this.#inFlight -= events;
        if (!committed) this.#added = Math.max(0, this.#added - events);
      },
    };
  }

  /** The figure {@linkcode BacklogGate.admit} decides on, refreshed when stale. */
  async estimate(): Promise<number> {
    await this.#fresh();
    return this.#backlog + this.#added;
  }

  /** The figure as last known, without reading (0 before the first read). */
  peek(): number {
    return this.#backlog + this.#added;
  }

  async #fresh(): Promise<void> {
    if (performance.now() - this.#readAt >= BACKLOG_CACHE_MS) await this.#refresh();
  }

  #refresh(): Promise<void> {
    this.#reading ??= (async () => {
      const started = performance.now();
      const addedBefore = this.#added;
      const inFlight = this.#inFlight;
      try {
        const backlog = await readBacklog(this.#kv);
        // What was admitted before the read is in it, save what was still in flight (counted
        // twice at worst, which only refuses a little early).
        this.#backlog = backlog;
        this.#added = Math.max(0, this.#added - addedBefore + inFlight);
        this.#readAt = started;
      } finally {
        this.#reading = null;
      }
      if (started - this.#sweptAt >= UNDELIVERED_SWEEP_MS) {
        this.#sweptAt = started;
        // In the background: a failed sweep (the store closing) is retried by the next one.
        retireUndelivered(this.#kv).then((retired) => {
          if (retired > 0) this.#readAt = -Infinity;
        }, () => {});
      }
    })();
    return this.#reading;
  }
}

/** True for a message this service enqueued. */
export function isEventsMessage(value: unknown): value is EventsMessage {
  const m = value as EventsMessage;
  return typeof m === "object" && m !== null && m.kind === "events" && typeof m.id === "string" &&
    typeof m.brandId === "string" && typeof m.batch === "object" && Array.isArray(m.batch?.events);
}

/** Records a message the forwarder will not retry. */
export async function writeDeadLetter(
  kv: Deno.Kv,
  message: EventsMessage,
  reason: string,
  failedAt: Date,
): Promise<void> {
  await kv.set(deadLetterKey(message.id), {
    deadLetter: true,
    message,
    reason,
    failedAt: failedAt.toISOString(),
  });
}

/** Dead letters, oldest first, optionally of one brand. */
export async function listDeadLetters(kv: Deno.Kv, brandId?: string): Promise<DeadLetter[]> {
  const letters: DeadLetter[] = [];
  for await (const entry of kv.list({ prefix: deadLetterPrefix() })) {
    const letter = _toDeadLetter(String(entry.key[1]), entry.value);
    if (letter && (!brandId || letter.message.brandId === brandId)) letters.push(letter);
  }
  return letters;
}

/** One dead letter and its KV entry (for an atomic delete after replay), or null. */
export async function getDeadLetter(
  kv: Deno.Kv,
  id: string,
): Promise<{ letter: DeadLetter; entry: Deno.KvEntry<unknown> } | null> {
  const entry = await kv.get(deadLetterKey(id));
  const letter = entry.versionstamp ? _toDeadLetter(id, entry.value) : null;
  return letter ? { letter, entry: entry as Deno.KvEntry<unknown> } : null;
}

function _toDeadLetter(id: string, value: unknown): DeadLetter | null {
  // KV itself writes the bare message when retries run out; the forwarder writes a wrapper.
  if (isEventsMessage(value)) {
    return { id, message: value, reason: "delivery retries exhausted", failedAt: null };
  }
  const wrapped = value as {
    deadLetter?: boolean;
    message?: unknown;
    reason?: string;
    failedAt?: string;
  };
  if (wrapped?.deadLetter && isEventsMessage(wrapped.message)) {
    return {
      id,
      message: wrapped.message,
      reason: wrapped.reason ?? "",
      failedAt: wrapped.failedAt ?? null,
    };
  }
  return null;
}

/**
 * An upper bound of a value's size as Deno KV stores it (V8 serialization), from its JSON text:
 * structure and Latin-1 text take no more than their JSON, a string with wider characters two
 * bytes a unit, a number at most 9 bytes, an object or array a few bytes of framing. Measuring
 * with V8's serializer itself is exact but far slower and churns the allocator under load; the
 * bound is property-tested against it (tests/lib/ingest/queue_test.ts).
 */
export function storedSizeBound(value: unknown, json = JSON.stringify(value)): number {
  const { wide, numbers, containers } = _scanJson(json);
  return (wide ? 2 : 1) * json.length + 9 * numbers + 8 * containers + 64;
}

/**
 * {@linkcode storedSizeBound} of a JSON object once `member` (`"key":value,`) is inserted after
 * its `{`, from the bound without it (`bound`, over `jsonLength` units): the member adds at most
 * two bytes a unit and 9 a number, and a wide character in it could double the rest too.
 */
export function storedSizeBoundWith(bound: number, jsonLength: number, member: string): number {
  const { wide, numbers, containers } = _scanJson(member);
  return bound + 2 * member.length + 9 * numbers + 8 * containers + (wide ? jsonLength : 0);
}

const _WIDE = /[^\x20-\xff]/;
const _DIGIT_RUN = /[0-9]+/g;
// Below this length a loop over the characters beats the native scans' call overhead.
const _SHORT_JSON = 64;

// This runs for every event at the edge (and for its id): native scans (a regular expression,
// indexOf) over an event's text cost half a charCodeAt loop; over a short text, twice as much.
function _scanJson(json: string): { wide: boolean; numbers: number; containers: number } {
  if (json.length < _SHORT_JSON) return _scanChars(json);
  let containers = 0;
  for (let i = json.indexOf("{"); i >= 0; i = json.indexOf("{", i + 1)) containers++;
  for (let i = json.indexOf("["); i >= 0; i = json.indexOf("[", i + 1)) containers++;
  let numbers = 0;
  _DIGIT_RUN.lastIndex = 0;
  while (_DIGIT_RUN.test(json)) numbers++;
  return { wide: _WIDE.test(json), numbers, containers };
}

function _scanChars(json: string): { wide: boolean; numbers: number; containers: number } {
  let wide = false;
  let numbers = 0;
  let containers = 0;
  let inDigits = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c < 0x20 || c > 0xff) wide = true;
    const digit = c >= 0x30 && c <= 0x39;
    if (digit && !inDigits) numbers++;
    inDigits = digit;
    if (c === 0x7b || c === 0x5b) containers++;
  }
  return { wide, numbers, containers };
}

/** The outcome of replaying one dead letter. */
export interface ReplayOutcome {
  id: string;
  applied: number;
  failed: { eventId: string; status: number; error: string }[];
}

/**
 * Re-applies a dead letter's events through the engine. When every event applies, the letter is
 * deleted (only if unchanged meanwhile); otherwise it keeps only the events that failed, with
 * the new reason. The engine is idempotent, so replaying twice never applies an event twice.
 *
 * `events`, when given, replace the letter's (an operator's fix): each must keep the id of one
 * of the letter's events, so that it is applied at most once; a letter event left out is
 * dropped.
 */
export async function replayDeadLetter(
  deps: { kv: Deno.Kv; engine: Engine; now: () => Date },
  id: string,
  options: { events?: IngestEvent[] } = {},
): Promise<ReplayOutcome | null> {
  const found = await getDeadLetter(deps.kv, id);
  if (!found) return null;
  const { letter, entry } = found;
  const events = options.events ?? letter.message.batch.events;
  if (options.events) _checkReplacement(letter, options.events);
  // Checked again: an operator's replacement events never passed the edge.
  const { checked: _checked, ...stored } = letter.message.batch;
  const batch = { ...stored, events };
  const results = await deps.engine.applyEvents(batch);
  const failed = events.flatMap((event, i) => {
    const result = results[i];
    return result && !result.ok
      ? [{ event, eventId: event.id, status: result.status, error: result.error }]
      : [];
  });
  if (failed.length === 0) {
    await deps.kv.atomic().check(entry).delete(entry.key).commit();
  } else {
    await writeDeadLetter(
      deps.kv,
      { ...letter.message, batch: { ...batch, events: failed.map((f) => f.event) } },
      failed.map((f) => `${f.eventId}: ${f.status} ${f.error}`).join("; ").slice(0, 2000),
      deps.now(),
    );
  }
  return {
    id,
    applied: results.filter((r) => r?.ok).length,
    failed: failed.map(({ eventId, status, error }) => ({ eventId, status, error })),
  };
}

// A replacement event with a new id could be applied twice (once per replay): refused.
function _checkReplacement(letter: DeadLetter, events: IngestEvent[]): void {
  const known = new Set(letter.message.batch.events.map((event) => event.id));
  const seen = new Set<string>();
  for (const event of events) {
    if (!known.has(event.id)) {
      throw new Error(`event ${event.id} is not in dead letter ${letter.id}; keep the ids`);
    }
    if (seen.has(event.id)) throw new Error(`event ${event.id} is given twice`);
    seen.add(event.id);
  }
}
