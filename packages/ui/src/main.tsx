import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, AuthRequired, onAuthRequired, serverConfig, storedToken, storeToken } from './api.js';
import { FleetPage } from './fleet.js';
import { HostPage } from './host.js';
import { HostsPage } from './hosts.js';
import { InstancePage } from './instance.js';
import { useLiveState } from './live.js';
import { Link, useRoute } from './router.js';
import { DecisionsPage } from './decisions.js';
import { WhyNotPage } from './why-not.js';
import './style.css';

/** The login prompt: a token (X-Auth-Token), checked with one read before it is kept. */
function Login({ message, onDone }: { message: string; onDone: () => void }) {
  const [token, setToken] = useState('');
  const [problem, setProblem] = useState(message);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (token.trim() === '') {
      setProblem('token: enter the token you use with the API (X-Auth-Token)');
      return;
    }
    setBusy(true);
    storeToken(token.trim());
    try {
      await api.flavors();
      onDone();
    } catch (err) {
      storeToken(undefined);
      setProblem(err instanceof AuthRequired ? 'the server refused this token (wrong or expired)' : `cannot check the token: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login">
      <form data-testid="login" onSubmit={submit} aria-describedby="login-problem">
        <h1>ert</h1>
        <p>Sign in with the token you give the API (<code>X-Auth-Token</code>). It is kept in this tab only (sessionStorage).</p>
        <label for="token">Token</label>
        <input id="token" name="token" type="password" autoComplete="off" value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} autoFocus />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {problem && (
          <p id="login-problem" class="problem" role="alert" data-testid="login-problem">
            {problem}
          </p>
        )}
      </form>
    </main>
  );
}

/**
 * With `--auth trusted-headers` the proxy in front says who the user is: no token is asked for.
 * A 401 means a request reached ert without the proxy's identity: said so, with a retry.
 */
function ProxyRefused({ message, onRetry }: { message: string; onRetry: () => void }) {
  return (
    <main class="login">
      <div data-testid="proxy-refused">
        <h1>ert</h1>
        <p class="problem" role="alert" data-testid="login-problem">
          Not signed in: {message}.
        </p>
        <p>
          Open the view through the proxy that signs you in (it sets <code>X-User-Id</code>, <code>X-Project-Id</code> and <code>X-Roles</code>), then retry.
        </p>
        <button type="button" onClick={onRetry}>
          Retry
        </button>
      </div>
    </main>
  );
}

function NotFound({ path }: { path: string }) {
  return (
    <main>
      <h1>Not found</h1>
      <p>
        No page at <code>/ui{path}</code>. <Link href="/">The fleet</Link>.
      </p>
    </main>
  );
}

/** Whether the live updates' stream is open (live.ts). */
function LiveIndicator() {
  const state = useLiveState();
  const text = { live: 'live', connecting: 'connecting…', off: 'not live' }[state];
  return (
    <span class={`live live-${state}`} data-testid="live" data-state={state} title="Updates without a reload (server-sent events from /scheduler/v1/events)">
      {text}
    </span>
  );
}

function App() {
  const route = useRoute();
  // undefined: signed in (or opening directly); a string: the login prompt with that message.
  const proxy = serverConfig().identity === 'proxy';
  const [prompt, setPrompt] = useState<string | undefined>(storedToken() === undefined && !proxy ? '' : undefined);
  const [epoch, setEpoch] = useState(0);
  useEffect(
    () =>
      onAuthRequired((message) => {
        storeToken(undefined);
        setPrompt(message);
      }),
    [],
  );
  const done = () => {
    setPrompt(undefined);
    setEpoch(epoch + 1);
  };
  if (prompt !== undefined && proxy) return <ProxyRefused message={prompt} onRetry={done} />;
  if (prompt !== undefined) return <Login message={prompt} onDone={done} />;
  const signedIn = sessionStorage.getItem('ert-token') !== null;
  let page;
  if (route.path === '/' || route.path === '') page = <FleetPage key={epoch} search={route.search} />;
  else if (route.path === '/decisions') page = <DecisionsPage key={epoch} />;
  else if (route.path === '/hosts') page = <HostsPage key={epoch} />;
  else if (route.path.startsWith('/hosts/')) page = <HostPage key={`${epoch}${route.path}`} name={decodeURIComponent(route.path.slice('/hosts/'.length))} />;
  else if (route.path.startsWith('/instances/')) page = <InstancePage key={`${epoch}${route.path}`} uuid={decodeURIComponent(route.path.slice('/instances/'.length))} />;
  else if (route.path === '/why-not') page = <WhyNotPage key={`${epoch}${route.search}`} search={route.search} />;
  else page = <NotFound path={route.path} />;
  return (
    <>
      <header>
        <nav aria-label="main">
          <strong>ert</strong>
          <Link href="/">Fleet</Link>
          <Link href="/hosts">Hosts</Link>
          <Link href="/why-not">Why not here?</Link>
          <Link href="/decisions">Decisions</Link>
          <span class="spacer" />
          <LiveIndicator />
          {signedIn && !serverConfig().openToken && (
            <button
              type="button"
              onClick={() => {
                storeToken(undefined);
                setPrompt('');
              }}
            >
              Sign out
            </button>
          )}
        </nav>
      </header>
      {page}
    </>
  );
}

render(<App />, document.getElementById('app')!);
