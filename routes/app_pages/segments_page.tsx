/**
 * The segments pages: the brand's segments with their member counts, and one segment with its
 * condition shown readably, its members entered and exited per day, its first members and an
 * export link; read through the functions the `/cdp/segments` routes call.
 *
 * @module
 */
import { membershipHistory } from "../../lib/audiences/feed.ts";
import type { AppDeps } from "../../lib/http/app_env.ts";
import type { BrandConcurrency } from "../../lib/http/brand_concurrency.ts";
import type { Condition } from "../../lib/engine/conditions.ts";
import { withQueryBudget } from "../../lib/engine/queries.ts";
import {
  countSegments,
  listSegments,
  membersPage,
  type SegmentView,
} from "../../lib/engine/segments.ts";
import { OFFSET_WINDOW } from "../../lib/http/pagination.ts";
import { Card, ChartCard, DataTable, Layout } from "./layout.tsx";
import type { PageContext } from "./page_context.ts";

/** Segments per page of the list. */
export const SEGMENTS_PAGE = 50;
/** Members shown on a segment's page. */
export const SEGMENT_MEMBERS = 20;
/** Member counts stop here, as the members API's `totalSize` does. */
export const MEMBER_COUNT_CAP = OFFSET_WINDOW + 1;

/** Days of entries and exits a segment's page charts. */
export const MEMBERSHIP_DAYS = 30;

/** What the list shows for a count not made (past the budget, failed, or the share taken). */
export const UNKNOWN_COUNT = "—";

/**
 * Renders the brand's segments with their member counts. The counts are heavy reads: they run on
 * the brand's free permits of `heavyReads` only, within QUERY_TIMEOUT_MS in all, and a count not
 * made shows {@linkcode UNKNOWN_COUNT}; the page itself is never refused for them.
 */
export async function segmentsPage(
  deps: AppDeps,
  page: PageContext,
  input: { scope: string; offset: number; heavyReads: BrandConcurrency },
) {
  const now = deps.now();
  const segments = await listSegments(deps.sql, input.scope, {
    limit: SEGMENTS_PAGE,
    offset: input.offset,
  });
  const brandId = page.brand.brandId;
  const counts = await countSegments(deps.sql, segments.list, {
    now,
    cap: MEMBER_COUNT_CAP,
    budget: {
      permit: () => input.heavyReads.tryAcquire(brandId),
      timeoutMs: deps.config.queryTimeoutMs,
    },
  });
  const unknown = counts.some((n) => n === null);
  return (
    <Layout title="Segments" page={page} active="segments">
      <h1>Segments</h1>
      <p class="subdued">{segments.total} segments. Defined through POST /cdp/segments.</p>
      {unknown && (
        <p class="subdued" data-note="unknown-counts">
          {UNKNOWN_COUNT}: not counted in time, or while the brand's other heavy reads (exports,
          members, queries) held its share; reload to count again.
        </p>
      )}
      <div class="grid">
        <Card title="Segments" id="segments">
          <DataTable
            id="segments"
            caption="Member counts are capped at the members API's window"
            columns={[{ label: "Segment" }, { label: "Id" }, { label: "Members", numeric: true }]}
            rows={segments.list.map((segment, i) => [
              <a href={page.link(`/app/segments/${encodeURIComponent(segment.id)}`)}>
                {segment.name}
              </a>,
              <span class="mono">{segment.id}</span>,
              _count(counts[i] ?? null),
            ])}
          />
          <div class="pager">
            {input.offset > 0 && (
              <a
                href={page.link("/app/segments", {
                  offset: Math.max(0, input.offset - SEGMENTS_PAGE),
                })}
              >
                Previous
              </a>
            )}
            {input.offset + SEGMENTS_PAGE < segments.total && (
              <a href={page.link("/app/segments", { offset: input.offset + SEGMENTS_PAGE })}>
                Next
              </a>
            )}
          </div>
        </Card>
      </div>
    </Layout>
  );
}

/**
 * Renders one segment: its condition, member count, first members and export link. Its members
 * are a heavy read on the brand's share of `heavyReads` (429 past it), as the members API's.
 */
export async function segmentPage(
  deps: AppDeps,
  page: PageContext,
  segment: SegmentView,
  heavyReads: BrandConcurrency,
) {
  const members = await heavyReads.run(page.brand.brandId, () =>
    withQueryBudget(
      deps.sql,
      deps.config.queryTimeoutMs,
      (sql) =>
        membersPage(sql, segment, {
          limit: SEGMENT_MEMBERS,
          offset: 0,
          now: deps.now(),
          cap: MEMBER_COUNT_CAP,
        }),
    ));
  const history = await membershipHistory(deps.sql, {
    scope: segment.scope,
    segmentId: segment.id,
    now: deps.now(),
    days: MEMBERSHIP_DAYS,
  });
  const changedDays = history.filter((d) => d.entered + d.exited > 0).reverse();
  return (
    <Layout title={segment.name} page={page} active="segments">
      <h1>{segment.name}</h1>
      <p class="subdued">
        <span class="mono">{segment.id}</span>
        {segment.description ? ` · ${segment.description}` : ""}
      </p>
      <div class="stats">
        <div class="stat" data-stat="members">
          <div class="subdued">Members</div>
          <div class="value">{_count(members.totalSize)}</div>
        </div>
      </div>
      <div class="grid">
        <Card title="Condition" id="condition">
          <p class="formula">Profiles matching all of this (the shop's scope is always added).</p>
          <ConditionTree condition={segment.condition} />
          <details>
            <summary>As JSON</summary>
            <pre class="mono">{JSON.stringify(segment.condition, null, 2)}</pre>
          </details>
        </Card>
        <ChartCard
          id="membership"
          title="Entered and exited"
          formula={`Profiles that entered or left the segment per day (UTC), last ${MEMBERSHIP_DAYS} days. Source: GET /cdp/segments/{id}/changes.`}
          svg={page.charts.grouped({
            labels: history.map((d) => d.day.slice(5)),
            series: [
              { name: "Entered", values: history.map((d) => d.entered) },
              { name: "Exited", values: history.map((d) => d.exited) },
            ],
          })}
        >
          <DataTable
            id="membership"
            caption="Days with changes, latest first"
            columns={[
              { label: "Day" },
              { label: "Entered", numeric: true },
              { label: "Exited", numeric: true },
            ]}
            rows={changedDays.map((d) => [d.day, String(d.entered), String(d.exited)])}
          />
        </ChartCard>
        <Card title="Members" id="members">
          <p class="formula">
            The first {SEGMENT_MEMBERS} by profile id.{" "}
            <a href={page.link(`/app/segments/${encodeURIComponent(segment.id)}/export`)}>
              Export all as NDJSON
            </a>
          </p>
          <DataTable
            id="members"
            caption="Members"
            columns={[{ label: "Profile" }, { label: "Email" }]}
            rows={members.list.map((p) => [
              <a href={page.link(`/app/customers/${encodeURIComponent(p.itemId)}`)}>{p.itemId}</a>,
              String(members.identities[p.itemId]?.email ?? ""),
            ])}
          />
        </Card>
      </div>
    </Layout>
  );
}

function _count(n: number | null): string {
  if (n === null) return UNKNOWN_COUNT;
  return n >= MEMBER_COUNT_CAP ? `${OFFSET_WINDOW}+` : String(n);
}

const _OPERATORS: Record<string, string> = {
  equals: "=",
  notEquals: "≠",
  greaterThan: ">",
  greaterThanOrEqualTo: "≥",
  lessThan: "<",
  lessThanOrEqualTo: "≤",
};

/** A condition tree as nested lists: boolean nodes as "all of"/"any of", leaves as sentences. */
function ConditionTree(props: { condition: Condition }) {
  const { type, parameterValues: params } = props.condition as {
    type: string;
    parameterValues: Record<string, unknown>;
  };
  if (type === "booleanCondition") {
    const subs = (params.subConditions ?? []) as Condition[];
    return (
      <ul class="condition">
        <li>
          {params.operator === "or" ? "any of" : "all of"}
          {subs.map((sub) => <ConditionTree condition={sub} />)}
        </li>
      </ul>
    );
  }
  if (type === "notCondition") {
    return (
      <ul class="condition">
        <li>
          not
          <ConditionTree condition={params.subCondition as Condition} />
        </li>
      </ul>
    );
  }
  const property = params.propertyName as string | undefined;
  const operator = params.comparisonOperator as string | undefined;
  const value = Object.entries(params).find(([k]) => k.startsWith("propertyValue"))?.[1];
  const text = property && operator
    ? `${property} ${_OPERATORS[operator] ?? operator}${
      value === undefined ? "" : ` ${JSON.stringify(value)}`
    }`
    : `${type} ${JSON.stringify(params)}`;
  return (
    <ul class="condition">
      <li class="mono">{text}</li>
    </ul>
  );
}
