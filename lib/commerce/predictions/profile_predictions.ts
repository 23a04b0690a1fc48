/**
 * Each profile's predictions, kept in Postgres (`profile_predictions`) so that conditions
 * (`predictions.*`) and segment exports read them: written from a brand's fit, replaced
 * wholesale for the brand's scope in one transaction. A profile gets the predictions of the
 * contact its customer record shows (lib/commerce/customers.ts: Shopify customer id, then
 * email, then phone), matched set-based in SQL.
 *
 * @module
 */
import type { Tx } from "../../store/db.ts";
import type { FittedModel } from "./model_fit.ts";
import { predictCustomer } from "./model_fit.ts";
import { type CustomerHistory, meanDayTotal, rfmRow } from "./rfm_summary.ts";

/** Every customer's predictions as columns (a worker hands them over cheaply), values as text. */
export interface PredictionColumns {
  contactIds: string[];
  pAlive: string[];
  expectedOrders90d: string[];
  expectedOrders365d: string[];
  predictedClv365d: string[];
  /** Days from the cut-off to the expected next order; null when P(alive) < 0.5. */
  waitDays: (number | null)[];
}

const _fixed = (value: number, digits: number) => String(Number(value.toFixed(digits)));

/**
 * Every customer's predictions under the fitted model, rounded as her insights show them
 * (customer_predictions.ts): her orders up to the cut-off day, or up to her last order day when
 * it is later (an order dated ahead of the clock).
 */
export function predictionColumns(
  model: FittedModel,
  histories: readonly CustomerHistory[],
  cutOffDay: number,
  discountRate: number,
): PredictionColumns {
  const columns: PredictionColumns = {
    contactIds: [],
    pAlive: [],
    expectedOrders90d: [],
    expectedOrders365d: [],
    predictedClv365d: [],
    waitDays: [],
  };
  for (const history of histories) {
    const row = rfmRow(history, Math.max(cutOffDay, history.days.at(-1)!));
    if (!row) continue;
    const p = predictCustomer(model, row, meanDayTotal(history), discountRate);
    columns.contactIds.push(history.customer);
    columns.pAlive.push(_fixed(p.p_alive, 4));
    columns.expectedOrders90d.push(_fixed(p.expected_orders_90d, 4));
    columns.expectedOrders365d.push(_fixed(p.expected_orders_365d, 4));
    columns.predictedClv365d.push(p.predicted_clv_365d.toFixed(2));
    columns.waitDays.push(p.expected_wait_days);
  }
  return columns;
}

/** The scope (shop domain) of a brand's storefront; null without one (it has no profiles). */
async function _scopeOf(tx: Tx, brandId: string): Promise<string | null> {
  const [row] = await tx<{ shop_domain: string }[]>`
    select shop_domain from integrations where brand_id = ${brandId} and provider = 'shopify'`;
  return row?.shop_domain ?? null;
}

/**
 * Replaces the brand's profile predictions with `columns` (none when null: the brand has no
 * model), in the caller's transaction: readers see the previous fit's rows or this one's, never a
 * mix. Answers how many profiles got predictions.
 */
export async function replaceProfilePredictions(
  tx: Tx,
  brandId: string,
  fit: { model: FittedModel; fittedAt: Date; columns: PredictionColumns } | null,
): Promise<number> {
  const scope = await _scopeOf(tx, brandId);
  if (scope === null) return 0;
  await tx`delete from profile_predictions where scope = ${scope}`;
  if (!fit || fit.columns.contactIds.length === 0) return 0;
  const c = fit.columns;
  const fittedAt = fit.fittedAt.toISOString();
  // A profile's contact is the first of its Shopify customer id, then its normalized email,
  // then its E.164 phone that names one of the brand's contacts (the oldest contact among
  // several), as lib/commerce/customers.ts's _contactOfProfile finds it, one profile at a time.
  // Each match is a hash join of the brand's contacts and the scope's profiles.
  const result = await tx`
    with pred as (
      select * from unnest(${c.contactIds}::text[], ${c.pAlive}::text[],
                           ${c.expectedOrders90d}::text[], ${c.expectedOrders365d}::text[],
                           ${c.predictedClv365d}::text[], ${c.waitDays}::float8[])
        as u(contact_id, p_alive, e90, e365, clv, wait_days)
    ),
    keyed as (
      select p.item_id,
             p.properties ->> 'shopifyCustomerId' as shopify_id,
             case when jsonb_typeof(p.properties -> 'email') = 'string'
               then lower(btrim(p.properties ->> 'email', E' \\t\\n\\r\\f\\v')) end as email,
             case when jsonb_typeof(p.properties -> 'phoneNumber') = 'string'
               then regexp_replace(regexp_replace(
                      btrim(p.properties ->> 'phoneNumber', E' \\t\\n\\r\\f\\v'),
                      '^\\(\\+([0-9]+)\\)', '+\\1'), '^00', '+') end as phone
      from profiles p
      where p.scope = ${scope}
        and (p.properties ? 'shopifyCustomerId' or p.properties ? 'email'
             or p.properties ? 'phoneNumber')
    ),
    matched as (
      select k.item_id, 1 as rank, c.created_at, c.id as contact_id
      from keyed k join contacts c
        on c.brand_id = ${brandId} and c.shopify_customer_id = k.shopify_id
      union all
      select k.item_id, 2, c.created_at, c.id
      from keyed k join contacts c on c.brand_id = ${brandId} and c.email = k.email
      union all
      select k.item_id, 3, c.created_at, c.id
      from keyed k join contacts c
        on c.brand_id = ${brandId}
       and k.phone ~ '^\\+[0-9[:space:]().+-]*$'
       and c.phone = '+' || regexp_replace(substr(k.phone, 2), '[[:space:]().-]', '', 'g')
    ),
    chosen as (
      select distinct on (item_id) item_id, contact_id
      from matched
      order by item_id, rank, created_at
    )
    insert into profile_predictions (scope, profile_id, p_alive, expected_orders_90d,
      expected_orders_365d, predicted_clv_365d, expected_next_order_at, model, fitted_at)
    select ${scope}, ch.item_id, pr.p_alive::numeric, pr.e90::numeric, pr.e365::numeric,
           pr.clv::numeric, ${fittedAt}::timestamptz + pr.wait_days * interval '1 day',
           ${fit.model.selected}, ${fittedAt}::timestamptz
    from chosen ch join pred pr on pr.contact_id = ch.contact_id`;
  return result.count;
}
