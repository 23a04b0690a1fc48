/**
 * The engine's admission hook (`EventAdmission`, lib/engine/engine.ts) for privacy: inside the
 * apply transaction, under the scope's write lock, it drops the events of erased people that were
 * accepted before their erase, and every event of a suppressed person, before anything is stored;
 * it counts them on the request that set the block and per scope and day.
 *
 * @module
 */
import type { AdmittedEvent, EventAdmission } from "../engine/engine.ts";
import type { Sql, Tx } from "../store/db.ts";
import { eventIdentifiers, type Identifier, type IdentifierHasher } from "./identifiers.ts";

interface _Block {
  kind: "erased" | "suppressed";
  id_hash: string;
  request_id: string;
  received_until: Date | null;
}

const _NONE: ReadonlySet<string> = new Set();

/** The admission hook over the privacy blocks; `hasher` is opened on first use. */
export function createPrivacyAdmission(hasher: () => Promise<IdentifierHasher>): EventAdmission {
  return {
    async drop(tx, scope, events) {
      const keyed = await hasher();
      // A batch names few people many times: each identifier is hashed once.
      const memo = new Map<string, string>();
      const hash = (id: Identifier) => {
        const key = `${id.kind}\u0000${id.value}`;
        let hashed = memo.get(key);
        if (hashed === undefined) memo.set(key, hashed = keyed.hash(id));
        return hashed;
      };
      const hashes = events.map((event) =>
        eventIdentifiers(event.profileId, event.properties).map(hash)
      );
      const blocks = await tx<_Block[]>`
        select kind, id_hash, request_id, received_until from privacy_blocks
        where scope = ${scope} and id_hash = any(${[...new Set(hashes.flat())]}::text[])`;
      if (blocks.length === 0) return _NONE;
      const byHash = Map.groupBy(blocks, (block) => block.id_hash);
      const dropped = new Map<string, { requestId: string; day: string }>();
      events.forEach((event, i) => {
        const block = hashes[i]!.flatMap((hash) => byHash.get(hash) ?? [])
          .find((b) => _blocks(b, event));
        if (block) {
          dropped.set(event.id, {
            requestId: block.request_id,
            day: event.receivedAt.slice(0, 10),
          });
        }
      });
      if (dropped.size > 0) await _count(tx, scope, [...dropped.values()]);
      return new Set(dropped.keys());
    },
  };
}

// A suppression drops everything; an erasure what was accepted before it.
function _blocks(block: _Block, event: AdmittedEvent): boolean {
  if (block.kind === "suppressed") return true;
  return block.received_until !== null &&
    Date.parse(event.receivedAt) <= block.received_until.getTime();
}

async function _count(
  tx: Tx,
  scope: string,
  dropped: { requestId: string; day: string }[],
): Promise<void> {
  const perRequest = Map.groupBy(dropped, (d) => d.requestId);
  const perDay = Map.groupBy(dropped, (d) => d.day);
  await tx`
    update privacy_requests r set dropped = r.dropped + x.n
    from unnest(${[...perRequest.keys()]}::text[], ${
    [...perRequest.values()].map((d) => d.length)
  }::bigint[]) as x(id, n)
    where r.id = x.id`;
  await tx`
    insert into privacy_dropped_daily (scope, day, events)
    select ${scope}, x.day, x.n
    from unnest(${[...perDay.keys()]}::date[], ${
    [...perDay.values()].map((d) => d.length)
  }::bigint[])
      as x(day, n)
    on conflict (scope, day) do update set events = privacy_dropped_daily.events + excluded.events`;
}

/** Events of the brand dropped by suppression or erasure, per UTC day (inclusive range). */
export async function droppedEventsByDay(
  sql: Sql,
  brandId: string,
  range: { from?: string; to?: string } = {},
): Promise<{ day: string; events: number }[]> {
  const rows = await sql<{ day: string; events: number }[]>`
    select to_char(d.day, 'YYYY-MM-DD') as day, d.events::int as events
    from privacy_dropped_daily d
    join integrations i on i.shop_domain = d.scope and i.brand_id = ${brandId}
    where d.day >= ${range.from ?? "0001-01-01"}::date and d.day <= ${
    range.to ?? "9999-12-31"
  }::date
    order by d.day`;
  return rows.map((row) => ({ day: row.day, events: row.events }));
}
