import { useEffect, useState } from 'preact/hooks';
import { ApiFailure, AuthRequired } from './api.js';

/** The value of `load()` once it resolves, or its error; reloaded when `deps` change (the old value shown meanwhile). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): { value?: T; error?: unknown } {
  const [state, setState] = useState<{ value?: T; error?: unknown }>({});
  useEffect(() => {
    let live = true;
    // A reload (deps changed) keeps showing the previous value until the new one arrives.
    setState((previous) => ({ ...(previous.value !== undefined ? { value: previous.value } : {}) }));
    load().then(
      (value) => live && setState({ value }),
      (error: unknown) => live && setState({ error }),
    );
    return () => {
      live = false;
    };
  }, deps);
  return state;
}

export function Loading({ what }: { what: string }) {
  return (
    <main aria-busy="true">
      <p class="loading">Loading {what}…</p>
    </main>
  );
}

/** An error as a message (never a blank page); a 401 is the login prompt's, shown by the App. */
export function Failure({ error }: { error: unknown }) {
  if (error instanceof AuthRequired) return <Loading what="the login prompt" />;
  const text = error instanceof ApiFailure ? `${error.code ?? error.status}: ${error.message}` : String((error as Error)?.message ?? error);
  return (
    <main>
      <p class="problem" role="alert" data-testid="failure">
        {text}
      </p>
    </main>
  );
}
