import { defineConfig } from "vite";

// `npm run dev` proxies the API to a local `react-agent serve`; the build is served by
// the service itself (app/webui.py) from dist/, hashed files under /assets.
export default defineConfig({
  base: "/",
  build: {
    outDir: "dist",
    assetsDir: "assets",
    target: "es2022",
    sourcemap: false,
    chunkSizeWarningLimit: 600,
  },
  server: {
    proxy: {
      "/api": "http://127.0.0.1:8000",
      "/healthz": "http://127.0.0.1:8000",
    },
  },
});
