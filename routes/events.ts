import { createRoute, z } from "@hono/zod-openapi";
import { requireScope } from "../lib/auth.ts";
import { EVENT_TYPES, eventTypeSummary } from "../lib/event_types.ts";
import { apiKeySecurity, errorResponses, newRouter } from "../lib/openapi.ts";

const EventTypeSchema = z.object({
  name: z.string(),
  source: z.enum(["built-in", "custom"]),
  title: z.string(),
  description: z.string(),
  schema: z.object({
    $id: z.string(),
    version: z.string(),
    required: z.array(z.string()),
    properties: z.record(z.string(), z.string()),
  }),
}).openapi("EventType");

const listTypes = createRoute({
  method: "get",
  path: "/cdp/events/types",
  tags: ["Events"],
  summary: "List the event types this brand can send",
  security: apiKeySecurity,
  responses: {
    200: {
      description: "The catalog, sorted by name",
      content: {
        "application/json": {
          schema: z.object({ eventTypes: z.array(EventTypeSchema), scope: z.string() }),
        },
      },
    },
    ...errorResponses(401, 403, 405),
  },
});

// Built-in types never change while the process runs, so the sorted catalog is built once.
const _catalog = EVENT_TYPES.map(eventTypeSummary)
  .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

/** Event routes: the catalog (ingest joins in the ingestion issue). */
export function eventRoutes() {
  return newRouter().openapi(listTypes, (c) => {
    const scope = requireScope(c);
    return c.json({ eventTypes: _catalog, scope }, 200);
  });
}
