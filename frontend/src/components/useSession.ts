/**
 * The session as server state: who is logged in (or null), with login and logout mutations.
 * Any 401 from another query clears it (see `queryClient.ts`), which sends the person to /login.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { sessionGet, sessionKeys, sessionLogin, sessionLogout, type User } from "../api/auth";

export function useSession() {
  const query = useQuery({
    queryKey: sessionKeys.current(),
    queryFn: ({ signal }) => sessionGet(signal),
    staleTime: 5 * 60_000,
    retry: false,
  });
  return { ...query, user: query.data ?? null };
}

export function useLogin() {
  const client = useQueryClient();
  return useMutation({
    mutationKey: ["login"],
    mutationFn: ({ username, password }: { username: string; password: string }) =>
      sessionLogin(username, password),
    onSuccess: (user: User) => {
      // Drop anything cached for a previous user before showing this one's data.
      client.removeQueries({ predicate: (q) => q.queryKey[0] !== sessionKeys.current()[0] });
      client.setQueryData(sessionKeys.current(), user);
    },
  });
}

export function useLogout() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: sessionLogout,
    onSuccess: () => {
      client.removeQueries({ predicate: (q) => q.queryKey[0] !== sessionKeys.current()[0] });
      client.setQueryData(sessionKeys.current(), null);
    },
  });
}
