import { afterEach } from "vitest";

// Unmount between tests and forget cookies, so no test sees another's session.
// (Files that run in the plain node environment have no DOM to clean.)
afterEach(async () => {
  if (typeof document === "undefined") return;
  const { cleanup } = await import("@testing-library/react");
  cleanup();
  document.cookie.split(";").forEach((part) => {
    const name = part.split("=")[0]?.trim();
    if (name) document.cookie = `${name}=; max-age=0`;
  });
});
