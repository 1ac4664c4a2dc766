import { defineConfig } from "vitest/config";

// Unit tests of the page's pure parts (no DOM: they run in Node). The page as a whole is
// tested in Chromium by tests/web/ (pytest + Playwright), against the built page.
export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    environment: "node",
  },
});
