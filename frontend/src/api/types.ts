/**
 * The API's records, generated: `schema.d.ts` is what openapi-typescript makes of the server's OpenAPI schema
 * (`python manage.py api_types` writes it; tests/webapp/test_openapi_types.py fails when it is stale, and checks
 * real answers against the schema). Each topic module (projects.ts, episodes.ts, ...) names its records from
 * `Schemas`; here are the few that every topic shares. Change a serializer on the server, regenerate, and `tsc`
 * shows what the pages must follow.
 */
import type { components } from "./schema";

/** The schema's named records (`components.schemas`). */
export type Schemas = components["schemas"];

/** A user as other records name one. */
export type UserRef = Schemas["UserRef"];
/** A checkpoint as other records name one. */
export type CheckpointRef = Schemas["CheckpointRef"];
