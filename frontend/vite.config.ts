import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

/**
 * One config for the build, the dev server and the tests.
 * Django serves dist/ in production (index.html for every non-API path, files under /assets/),
 * so the base stays "/" and the dev server only proxies the API and the WebSocket.
 */
const backend = process.env.LOUPE_BACKEND ?? "http://127.0.0.1:8000";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "dist",
    assetsDir: "assets",
    sourcemap: false,
    // The libraries (React, the router, react-query) change far less often than the app: their own chunk stays
    // cached across deploys, and neither chunk passes Vite's 500 kB warning.
    rolldownOptions: {
      output: {
        codeSplitting: { groups: [{ name: "vendor", test: /node_modules/ }] },
      },
    },
  },
  server: {
    proxy: {
      "/api": { target: backend, changeOrigin: false },
      "/ws": { target: backend.replace(/^http/, "ws"), ws: true, changeOrigin: false },
    },
  },
  test: {
    environment: "happy-dom",
    include: ["src/**/*.test.{ts,tsx}"],
    setupFiles: ["src/test/setup.ts"],
    restoreMocks: true,
    // One module graph and DOM a worker for all 52 files instead of a fresh one a file: 10 s of CPU against 49 s
    // here (import and environment were 30 of it), beside pytest at make test's start. The files keep no state
    // between them (restoreMocks; setup.ts cleans the DOM): three shuffled orders pass.
    isolate: false,
    // make test runs these beside pytest's two workers on two cores: a test that waits out a 2 s poll ran past
    // vitest's default 5 s there (CI, load about 10)
    testTimeout: 30_000,
  },
});
