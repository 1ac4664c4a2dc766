import { defineConfig } from "vite";

// `npm run dev` proxies the API to a local `react-agent serve`; the build goes into the
// HTTP package (app/http/static, served by app/http/webui.py), hashed files under /assets.
export default defineConfig({
  base: "/",
  build: {
    outDir: "../app/http/static",
    emptyOutDir: true,
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
