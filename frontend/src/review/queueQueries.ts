/** Server state of review queues (api/queues.ts): lists, one queue, "Review next", release and adjudication. */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useNavigate } from "react-router";
import {
  queueAdjudicate,
  queueCreate,
  type QueueCreateInput,
  queueGet,
  queueKeys,
  queueList,
  queueNext,
  queueRelease,
} from "../api/queues";
import type { Verdict } from "../api/review";

export function useQueues(projectId: number) {
  return useQuery({ queryKey: queueKeys.list(projectId), queryFn: ({ signal }) => queueList(projectId, signal) });
}

export function useQueue(queueId: number) {
  return useQuery({
    queryKey: queueKeys.detail(queueId),
    queryFn: ({ signal }) => queueGet(queueId, signal),
    enabled: Number.isFinite(queueId),
  });
}

export function useCreateQueue(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: QueueCreateInput) => queueCreate(projectId, body),
    onSuccess: () => client.invalidateQueries({ queryKey: queueKeys.list(projectId) }),
  });
}

/**
 * "Review next": asks the queue for the caller's next episode and opens its replay (with `?queue=`, so the
 * replay offers skip and goes on after the review); `empty` says when nothing is left for them.
 */
export function useReviewNext(projectId: number) {
  const navigate = useNavigate();
  const client = useQueryClient();
  const [empty, setEmpty] = useState<number | null>(null);
  const mutation = useMutation({
    mutationFn: (queueId: number) => queueNext(queueId),
    onSuccess: (next) => {
      client.invalidateQueries({ queryKey: queueKeys.detail(next.queue) });
      client.invalidateQueries({ queryKey: queueKeys.list(projectId) });
      if (next.episode === null) setEmpty(next.queue);
      else {
        setEmpty(null);
        navigate(`/projects/${projectId}/review/${next.episode}?queue=${next.queue}&item=${next.item}`);
      }
    },
  });
  return { go: (queueId: number) => mutation.mutate(queueId), mutation, empty };
}

export function useReleaseItem() {
  return useMutation({ mutationFn: ({ itemId, skip }: { itemId: number; skip: boolean }) => queueRelease(itemId, skip) });
}

export function useAdjudicate(queueId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: ({ itemId, verdict, comment }: { itemId: number; verdict: Verdict; comment: string }) =>
      queueAdjudicate(itemId, verdict, comment),
    onSuccess: () => client.invalidateQueries({ queryKey: queueKeys.detail(queueId) }),
  });
}
