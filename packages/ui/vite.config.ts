import { defineConfig } from 'vite';

// The web view is served by `ert serve` at /ui (packages/api/src/ui.ts) from dist/, with no
// CDN: every asset is bundled here. JSX is compiled for Preact by Vite's own transformer
// (no Babel preset needed).
export default defineConfig({
  base: '/ui/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
  },
});
