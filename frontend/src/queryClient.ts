/**
 * The query cache for server state. A 401 anywhere means the session ended: clear it so
 * RequireAuth sends the person to /login (and back afterwards).
 */
import { MutationCache, QueryCache, QueryClient } from "@tanstack/react-query";
import { ApiError } from "./api/client";
import { sessionKeys } from "./api/auth";

function retry(failureCount: number, error: unknown): boolean {
  // Only a network failure or a 5xx may pass on its own; a 4xx will answer the same again.
  if (error instanceof ApiError && (error.isNetwork || error.status >= 500)) return failureCount < 2;
  return false;
}

export function createQueryClient(): QueryClient {
  const client: QueryClient = new QueryClient({
    queryCache: new QueryCache({
      onError: (error, query) => {
        if (error instanceof ApiError && error.status === 401 && query.queryKey[0] !== sessionKeys.current()[0]) {
          client.setQueryData(sessionKeys.current(), null);
        }
      },
    }),
    mutationCache: new MutationCache({
      onError: (error, _vars, _ctx, mutation) => {
        const isLogin = mutation.options.mutationKey?.[0] === "login";
        if (!isLogin && error instanceof ApiError && error.status === 401) client.setQueryData(sessionKeys.current(), null);
      },
    }),
    defaultOptions: {
      queries: { retry, staleTime: 15_000, refetchOnWindowFocus: false },
      mutations: { retry: false },
    },
  });
  return client;
}
