/** The environment service's hosts (`envservice/hosts`, admins only): capacity and how busy each is. */
import { apiFetch } from "./client";
import type { Schemas } from "./types";

export type EnvServiceHosts = Schemas["EnvServiceHosts"];
export type EnvServiceHost = Schemas["EnvServiceHost"];

export const envServiceKeys = {
  hosts: () => ["envservice", "hosts"] as const,
};

export function envServiceHostsGet(signal?: AbortSignal): Promise<EnvServiceHosts> {
  return apiFetch<EnvServiceHosts>("envservice/hosts", { signal });
}
