/**
 * Operator commands for webhook destinations: their delivery health, their deliveries, and
 * replaying dead-lettered deliveries (docs/audiences.md#delivery).
 *
 * @module
 */
import {
  type DeliveryView,
  destinationsHealth,
  recentDeliveries,
  replayDeliveries,
} from "../audiences/deliveries.ts";
import { DomainError } from "../errors.ts";
import { findBrandContext } from "../tenancy/brands.ts";
import {
  brandIdArg,
  type Commands,
  defineCommand,
  limitArg,
  parseFlags,
  requiredFlag,
  UsageError,
} from "./command.ts";

const _DESTINATION_ID = /^dst_[0-9A-HJKMNP-TV-Z]{26}$/;
const _DELIVERY_ID = /^dlv_[0-9A-HJKMNP-TV-Z]{26}$/;

function _idArg(value: string, shape: RegExp, flag: string, what: string): string {
  if (!shape.test(value)) {
    throw new UsageError(
      `--${flag} takes ${what} id as the API prints it (got ${JSON.stringify(value)})`,
    );
  }
  return value;
}

/** The required `--destination ID`, checked. */
function _destinationArg(values: Record<string, unknown>): string {
  return _idArg(
    requiredFlag(values, "destination"),
    _DESTINATION_ID,
    "destination",
    "a destination",
  );
}

/** `destinations list`, `destinations deliveries`, `destinations replay`. */
export const destinationCommands: Commands = {
  "destinations list": defineCommand({
    usage: `--brand ID`,
    summary: "Lists a brand's destinations with their delivery health (pending, dead, last error).",
    parse(args) {
      const { values } = parseFlags(args, { brand: { type: "string" } });
      return { brandId: brandIdArg(requiredFlag(values, "brand")) };
    },
    async run(stores, input) {
      const brand = await findBrandContext(stores.sql, input.brandId);
      if (!brand) throw new DomainError("not_found", `no brand ${input.brandId}`);
      return {
        destinations: brand.scope
          ? await destinationsHealth(stores.sql, brand.scope, new Date())
          : [],
      };
    },
  }),

  "destinations deliveries": defineCommand({
    usage: `--destination ID [--status pending|delivered|dead] [--limit N]`,
    summary: "Lists a destination's deliveries, newest first (default 25, at most 1000).",
    parse(args) {
      const { values } = parseFlags(args, {
        destination: { type: "string" },
        status: { type: "string" },
        limit: { type: "string" },
      });
      const status = values.status as string | undefined;
      if (status !== undefined && !["pending", "delivered", "dead"].includes(status)) {
        throw new UsageError("--status takes pending, delivered or dead");
      }
      return {
        destinationId: _destinationArg(values),
        status: status as DeliveryView["status"] | undefined,
        limit: limitArg(values.limit, 25),
      };
    },
    async run(stores, input) {
      const page = await recentDeliveries(stores.sql, input.destinationId, { ...input, offset: 0 });
      return { deliveries: page.list, total: page.total };
    },
  }),

  "destinations replay": defineCommand({
    usage: `--destination ID [--delivery ID]`,
    summary: "Sends a destination's dead-lettered deliveries again (all of them, or one), with " +
      "their ids and bodies, retried for DESTINATION_RETRY_SECONDS more.",
    parse(args) {
      const { values } = parseFlags(args, {
        destination: { type: "string" },
        delivery: { type: "string" },
      });
      return {
        destinationId: _destinationArg(values),
        deliveryId: values.delivery === undefined
          ? undefined
          : _idArg(values.delivery as string, _DELIVERY_ID, "delivery", "a delivery"),
      };
    },
    async run(stores, input, config) {
      const replayed = await replayDeliveries(
        stores.sql,
        input,
        new Date(),
        config.destinations.retryMs,
      );
      if (input.deliveryId !== undefined && replayed.length === 0) {
        throw new DomainError(
          "not_found",
          `no dead delivery ${input.deliveryId} of ${input.destinationId}`,
        );
      }
      return { replayed };
    },
  }),
};
