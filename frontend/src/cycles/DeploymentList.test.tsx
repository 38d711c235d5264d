import { QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Deployment } from "../api/deployments";
import { createQueryClient } from "../queryClient";
import { DeploymentList } from "./DeploymentList";

function deployment(id: number, checkpoint: Deployment["checkpoint"]): Deployment {
  return { id, checkpoint, backend: "openai", active: id === 1, activated_at: null, deactivated_at: null, reason: "" };
}

describe("DeploymentList", () => {
  it("says how a checkpoint answers when it is not Loupe's text grammar", () => {
    render(
      <QueryClientProvider client={createQueryClient()}>
        <DeploymentList
          projectId={1}
          manage={false}
          deployments={[
            deployment(1, { id: 5, name: "ui-tars", action_format: "uitars", reads_images: true }),
            deployment(2, { id: 4, name: "v0", action_format: "loupe", reads_images: false }),
          ]}
        />
      </QueryClientProvider>,
    );
    const [vision, text] = screen.getAllByTestId("deployment-row");
    expect(within(vision).getByTestId("checkpoint-format").textContent).toBe("answers in uitars, reads screenshots");
    expect(within(text).queryByTestId("checkpoint-format")).toBeNull();
  });
});
