import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** Where the view is mounted (Vite's `base`). Deep links: /ui/, /ui/hosts, /ui/hosts/NAME, /ui/instances/UUID, /ui/why-not?flavor=NAME. */
export const BASE = '/ui';

export interface Route {
  /** Below BASE: `/`, `/hosts`, `/hosts/NAME`, `/instances/UUID`, `/why-not`. */
  path: string;
  search: string;
}

const current = (): Route => ({ path: location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) || '/' : location.pathname, search: location.search });

const listeners = new Set<() => void>();
addEventListener('popstate', () => listeners.forEach((l) => l()));

/** Go to `href` (below BASE) without a reload; `replace` rewrites the current history entry. */
export function navigate(href: string, replace = false): void {
  const url = `${BASE}${href}`;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  listeners.forEach((l) => l());
}

export function useRoute(): Route {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const l = () => setRoute(current());
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return route;
}

/** A link inside the view: a real href (open in a new tab works), followed without a reload. */
export function Link({ href, children, ...rest }: { href: string; children: ComponentChildren; class?: string }) {
  return (
    <a
      href={`${BASE}${href}`}
      {...rest}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}
