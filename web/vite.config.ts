import { defineConfig } from "vite";

// `npm run dev` proxies the API to a local `react-agent serve`; the build goes into the
// HTTP package (app/http/static, served by app/http/webui.py), hashed files under /assets.
// The libraries' licence headers (/*! ... @license */) stay in the files they ship in:
// lightweight-charts' Apache-2.0 NOTICE asks for its attribution in the served code.
export default defineConfig({
  base: "/",
  build: {
    outDir: "../app/http/static",
    emptyOutDir: true,
    assetsDir: "assets",
    target: "es2022",
    sourcemap: false,
    chunkSizeWarningLimit: 600,
    rolldownOptions: {
      output: { comments: { legal: true, annotation: false, jsdoc: false } },
    },
  },
  server: {
    proxy: {
      "/api": "http://127.0.0.1:8000",
      "/healthz": "http://127.0.0.1:8000",
    },
  },
});
