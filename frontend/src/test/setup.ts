import { afterEach } from "vitest";

// The test machine is shared and often busy: give findBy/waitFor more than the 1 s default
// before calling a slow render a failure. (Only where there is a DOM to query.)
if (typeof document !== "undefined") {
  const { configure } = await import("@testing-library/dom");
  configure({ asyncUtilTimeout: 5000 });
}

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
