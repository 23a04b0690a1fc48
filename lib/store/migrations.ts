/**
 * The Postgres schema as an ordered list of migrations, and applying them (docs/operations.md).
 *
 * @module
 */
import type { Sql } from "./db.ts";
import { tenancy } from "./migrations/0001_tenancy.ts";
import { engineWriteSide } from "./migrations/0002_engine_write_side.ts";
import { storefrontOrigins } from "./migrations/0003_storefront_origins.ts";
import { conditionHelpers } from "./migrations/0004_condition_helpers.ts";
import { segments } from "./migrations/0005_segments.ts";
import { commerce } from "./migrations/0006_commerce.ts";
import { shopifyWebhooks } from "./migrations/0007_shopify_webhooks.ts";
import { conditionArrays } from "./migrations/0008_condition_arrays.ts";
import { commerceSummaries } from "./migrations/0009_commerce_summaries.ts";
import { profileFillfactor } from "./migrations/0010_profile_fillfactor.ts";
import { orderLineItemsInOrders } from "./migrations/0011_order_line_items_in_orders.ts";
import { ordersOneDateIndex } from "./migrations/0012_orders_one_date_index.ts";
import { ordersStatementReferenceChecks } from "./migrations/0013_orders_statement_reference_checks.ts";
import { insightGenerationStripes } from "./migrations/0014_insight_generation_stripes.ts";
import { contactsStatementBrandCheck } from "./migrations/0015_contacts_statement_brand_check.ts";
import { brandLevelSummaries } from "./migrations/0016_brand_level_summaries.ts";
import { contactsBrandCheckHashJoin } from "./migrations/0017_contacts_brand_check_hash_join.ts";
import { integrationsRedactedAt } from "./migrations/0018_integrations_redacted_at.ts";
import { profilePredictions } from "./migrations/0019_profile_predictions.ts";
import { segmentsStoreCallerTree } from "./migrations/0020_segments_store_caller_tree.ts";
import { predictionModels } from "./migrations/0021_prediction_models.ts";
import { sessionProperties } from "./migrations/0022_session_properties.ts";
import { pixelClaims } from "./migrations/0023_pixel_claims.ts";
import { segmentMembership } from "./migrations/0024_segment_membership.ts";
import { destinations } from "./migrations/0025_destinations.ts";
import { privacy } from "./migrations/0026_privacy.ts";
import { destinationConsent } from "./migrations/0027_destination_consent.ts";
import { compactMembership } from "./migrations/0028_compact_membership.ts";
import { destinationSecretRotation } from "./migrations/0029_destination_secret_rotation.ts";

/** One schema change. Versions only grow; an applied migration is never edited. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Every migration, in order: a new one is a new file under migrations/, appended here. */
export const MIGRATIONS: readonly Migration[] = [
  tenancy,
  engineWriteSide,
  storefrontOrigins,
  conditionHelpers,
  segments,
  commerce,
  shopifyWebhooks,
  conditionArrays,
  commerceSummaries,
  profileFillfactor,
  orderLineItemsInOrders,
  ordersOneDateIndex,
  ordersStatementReferenceChecks,
  insightGenerationStripes,
  contactsStatementBrandCheck,
  brandLevelSummaries,
  contactsBrandCheckHashJoin,
  integrationsRedactedAt,
  profilePredictions,
  segmentsStoreCallerTree,
  predictionModels,
  sessionProperties,
  pixelClaims,
  segmentMembership,
  destinations,
  privacy,
  destinationConsent,
  compactMembership,
  destinationSecretRotation,
];

// An arbitrary constant shared by every process that migrates this schema.
const _MIGRATION_LOCK_ID = 7_236_112_401;

/**
 * Applies pending migrations in one transaction under an advisory lock, so running it twice, or
 * from two processes at once, applies each migration exactly once.
 */
export async function migrate(
  sql: Sql,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number[]> {
  return await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${_MIGRATION_LOCK_ID})`;
    await tx`
      create table if not exists schema_migrations (
        version integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`;
    const rows = await tx<{ version: number }[]>`select version from schema_migrations`;
    const done = new Set(rows.map((row) => row.version));
    const applied: number[] = [];
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      await tx.unsafe(migration.sql).simple();
      await tx`
        insert into schema_migrations (version, name)
        values (${migration.version}, ${migration.name})`;
      applied.push(migration.version);
    }
    return applied;
  });
}

/** Versions of `migrations` not applied yet (all of them before the first migration). */
export async function pendingMigrations(
  sql: Sql,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number[]> {
  const [table] = await sql<{ exists: boolean }[]>`
    select to_regclass('schema_migrations') is not null as exists`;
  if (!table?.exists) return migrations.map((migration) => migration.version);
  const rows = await sql<{ version: number }[]>`select version from schema_migrations`;
  const done = new Set(rows.map((row) => row.version));
  return migrations.map((migration) => migration.version).filter((version) => !done.has(version));
}
