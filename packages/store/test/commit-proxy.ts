/**
 * A TCP proxy between a store and its PostgreSQL server that loses a COMMIT's answer, or the
 * COMMIT, on demand: for the tests of a claim whose COMMIT's answer is lost
 * (`packages/store/test/lost-commit.test.ts`, `packages/scheduler/test/lost-commit.test.ts`).
 */
import net from 'node:net';

export type Mode = 'pass' | 'lose-answer' | 'lose-commit' | 'fatal-answer' | 'lose-begin';

/**
 * A TCP proxy to the PostgreSQL server. `arm(mode, n)`: at the n-th simple query naming COMMIT
 * from now on, `lose-answer` forwards it and drops the server's answer, `fatal-answer` forwards
 * it and answers in the server's place with a FATAL error of a code no list of connection
 * errors names (XX000), `lose-commit` drops the query; `lose-begin` drops the n-th simple
 * query naming BEGIN instead (the quick path's first trip, before any COMMIT). Each way both
 * sides of that connection are then closed (the server's side with a FIN, so it reads what was
 * sent before). With `refuse: n`, every connection is closed then and the next n new ones
 * refused (the server out of reach for a moment: the store cannot ask it, and an attempt to
 * apply the calls again would reach it). With `also: text`, only queries naming that text
 * count (a claim's write trip, not a read transaction's COMMIT).
 */
export class CommitProxy {
  private readonly server: net.Server;
  private mode: Mode = 'pass';
  private countdown = 0;
  /** Simple queries naming COMMIT seen since the last `arm`. */
  commits = 0;
  /** What the armed mode did: set once it acted. */
  acted: Mode | undefined;
  private refuse = 0;
  private also: string | undefined;
  private refusing = 0;
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.relay(client));
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as net.AddressInfo).port;
  }

  arm(mode: Mode, nth = 1, options: { refuse?: number; also?: string } = {}): void {
    this.mode = mode;
    this.countdown = nth;
    this.commits = 0;
    this.acted = undefined;
    this.refuse = options.refuse ?? 0;
    this.also = options.also;
    this.refusing = 0;
  }

  private relay(client: net.Socket): void {
    if (this.refusing > 0) {
      this.refusing--;
      return void client.destroy();
    }
    const upstream = net.connect(this.target.port, this.target.host);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    }
    let dropAnswer = false;
    const closeBoth = () => {
      client.destroy();
      upstream.end();
    };
    client.on('data', (chunk: Buffer) => {
      // 'Q': a simple query (the quick path sends its writes and COMMIT as one).
      const commit = chunk[0] === 0x51 && chunk.includes('COMMIT');
      if (commit) this.commits++;
      const begin = chunk[0] === 0x51 && chunk.includes('BEGIN');
      const named = this.also === undefined || chunk.includes(this.also);
      if (this.mode !== 'pass' && named && (this.mode === 'lose-begin' ? begin : commit)) {
        if (--this.countdown === 0) {
          this.acted = this.mode;
          this.mode = 'pass';
          if (this.refuse > 0) {
            this.refusing = this.refuse;
            if (this.acted === 'lose-answer') upstream.write(chunk);
            for (const socket of this.sockets) {
              if (socket === upstream) socket.end();
              else socket.destroy();
            }
            return;
          }
          if (this.acted === 'lose-commit' || this.acted === 'lose-begin') return closeBoth();
          dropAnswer = true;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!dropAnswer) return void client.write(chunk);
      if (this.acted === 'fatal-answer') client.write(fatalError('XX000', 'internal error'));
      closeBoth();
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.end());
    upstream.on('close', () => client.destroy());
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A PostgreSQL ErrorResponse message of severity FATAL. */
function fatalError(code: string, message: string): Buffer {
  const fields = Buffer.concat([
    ...[['S', 'FATAL'], ['V', 'FATAL'], ['C', code], ['M', message]].map(([tag, value]) => Buffer.from(`${tag}${value}\0`)),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

