import { fireEvent, render, screen } from "@testing-library/react";
import { useState } from "react";
import { MemoryRouter } from "react-router";
import { describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/client";
import { type Draft, draftOf, ReviewForm } from "./ReviewForm";

function Harness({ error = null, onSubmit }: { error?: unknown; onSubmit: () => void }) {
  const [draft, setDraft] = useState<Draft>({ ...draftOf(undefined), verdict: "accept" });
  return (
    <MemoryRouter>
      <ReviewForm
        draft={draft}
        onChange={setDraft}
        onSubmit={onSubmit}
        submitting={false}
        error={error}
        mine={undefined}
        savedAt={null}
        status="unreviewed"
        others={[]}
        nextEpisode={null}
        onStep={() => {}}
        reviewable
      />
    </MemoryRouter>
  );
}

describe("ReviewForm", () => {
  it("keeps a comment past the limit whole, counts it, and neither the button nor Ctrl+Enter sends it", () => {
    const onSubmit = vi.fn();
    render(<Harness onSubmit={onSubmit} />);
    const comment = screen.getByTestId("review-comment") as HTMLTextAreaElement;
    expect(comment.hasAttribute("maxlength")).toBe(false);
    const long = "c".repeat(10_001);
    fireEvent.change(comment, { target: { value: long } });
    expect(comment.value).toBe(long);
    expect(screen.getByTestId("limit-review_comment").textContent).toBe("10,001 / 10,000 characters: 1 too many, shorten it to send");
    expect((screen.getByTestId("review-submit") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.keyDown(comment, { key: "Enter", ctrlKey: true });
    expect(onSubmit).not.toHaveBeenCalled();
    fireEvent.change(comment, { target: { value: "c".repeat(10_000) } });
    fireEvent.keyDown(comment, { key: "Enter", ctrlKey: true });
    expect(onSubmit).toHaveBeenCalledTimes(1);
  });

  it("shows the server's refusal of the comment beside it and not again in the banner", () => {
    const message = "The comment is 10,001 characters long; the limit is 10,000. Shorten it and send it again: nothing was saved.";
    const error = new ApiError({ kind: "http", status: 400, detail: `comment: ${message}`, fieldErrors: { comment: [message] } });
    render(<Harness error={error} onSubmit={() => {}} />);
    const field = screen.getByTestId("review-comment").closest(".field") as HTMLElement;
    expect(field.querySelector(".field-error")?.textContent).toBe(message);
    expect(screen.getByTestId("error-banner").textContent).not.toContain(message);
    fireEvent.change(screen.getByTestId("review-comment"), { target: { value: "shorter" } });
    expect(field.querySelector(".field-error")).toBeNull();
  });
});
