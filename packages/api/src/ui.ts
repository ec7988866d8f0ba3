/**
 * The web view at `/ui` (docs/ui.md): the built assets of `@ert/ui` (Vite's `dist/`: an
 * `index.html` and hashed files under `assets/`), read into memory once when the server
 * starts and served from there. Only the files found at start exist, so no request path
 * ever reaches the file system (no traversal to guard against) and no static-file plugin is
 * needed for a handful of files. Every other path below `/ui/` answers `index.html`, so that
 * deep links (`/ui/hosts/NAME`, `/ui/why-not?flavor=NAME`) open the view, which routes in the
 * browser.
 *
 * The page itself needs no credentials (it holds no data); every call it makes carries
 * `X-Auth-Token` and goes through the API's own authentication and policy. The server writes
 * into the page where the Placement API is mounted and, only when it serves `noauth2` on a
 * loopback address (where anyone who can connect may already say `X-Auth-Token: admin`), the
 * token to open with, so that the view opens directly; with `trusted-headers` (the proxy in
 * front says who the user is) that no token is to be asked for; otherwise the view asks for a
 * token.
 */
import { readdir, readFile } from 'node:fs/promises';
import { extname, join, relative, sep } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Where `ert serve` mounts the web view. */
export const UI_PREFIX = '/ui';

export interface UiOptions {
  /** The built assets (`@ert/ui`'s `dist/`). Without an `index.html` there, `/ui` answers 503 saying how to build it. */
  dir: string;
  /** The token the view opens with, without asking: only for noauth2 on a loopback address (`admin`). */
  openToken?: string;
  /** `proxy` for `--auth trusted-headers`: the proxy in front identifies the user, so the view asks for no token (a 401 says the proxy's identity is missing). */
  identity?: 'proxy';
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

/** Scripts and styles from this origin only (the view is bundled: no CDN), no framing. */
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

async function filesBelow(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

const escapeAttribute = (s: string): string => s.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;');

/** The Fastify plugin of the web view (`createApi` registers it at the root when `ui` is given). */
export async function uiRoutes(app: FastifyInstance, options: UiOptions & { placementPrefix: string }): Promise<void> {
  const assets = new Map<string, { type: string; body: Buffer }>();
  let index: Buffer | undefined;
  try {
    for (const file of await filesBelow(options.dir)) {
      const path = relative(options.dir, file).split(sep).join('/');
      const body = await readFile(file);
      if (path === 'index.html') {
        const config = JSON.stringify({
          placementPrefix: options.placementPrefix,
          ...(options.openToken !== undefined ? { openToken: options.openToken } : {}),
          ...(options.identity !== undefined ? { identity: options.identity } : {}),
        });
        index = Buffer.from(body.toString('utf8').replace('</head>', `  <meta name="ert-ui" content="${escapeAttribute(config)}" />\n  </head>`));
      } else {
        assets.set(path, { type: TYPES[extname(path)] ?? 'application/octet-stream', body });
      }
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }

  const common = (reply: FastifyReply): FastifyReply => reply.header('x-content-type-options', 'nosniff').header('content-security-policy', CSP).header('referrer-policy', 'no-referrer');
  const page = (reply: FastifyReply): FastifyReply => {
    if (index === undefined) {
      return common(reply)
        .code(503)
        .header('content-type', 'text/plain; charset=utf-8')
        .send(`ert's web view is not built: no index.html in ${options.dir} (run "npm run build" in the repository, or install @ert/ui)\n`);
    }
    return common(reply).header('content-type', TYPES['.html']!).header('cache-control', 'no-cache').send(index);
  };

  app.get(UI_PREFIX, async (_request, reply) => reply.redirect(`${UI_PREFIX}/`, 301));
  app.get(`${UI_PREFIX}/*`, async (request, reply) => {
    const path = (request.params as { '*': string })['*'];
    const asset = assets.get(path);
    if (asset) {
      // Vite names every asset by its content's hash: a new build has new names.
      const immutable = path.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache';
      return common(reply).header('content-type', asset.type).header('cache-control', immutable).send(asset.body);
    }
    if (path.startsWith('assets/')) return common(reply).code(404).header('content-type', 'text/plain; charset=utf-8').send(`no asset ${path}\n`);
    return page(reply);
  });
}
