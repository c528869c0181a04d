// A stand-in for the downstream service of the gated side effect: a small HTTP
// server on loopback that counts the requests it receives per event (the body's
// "event" member) and answers like a payment or CRM call would, or fails the
// way docs/n8n.md's drills need.
//
// The end-to-end drills (drills.mjs) use it in-process; it also runs alone,
// so that the failure drills can be rehearsed by hand against your own n8n:
//
//   node test/n8n/sink.mjs [--port 5690] [--host 127.0.0.1] [--mode MODE]
//                          [--delay 300] [--status 500] [--kill-pid PID]
//
//   --mode ok       count the request, answer 200 {"id", "event", "n"} after
//                   --delay ms (default)
//   --mode refuse   listen on nothing: every connection to the port is
//                   refused (the side effect surely did not happen)
//   --mode hold     count the request and never answer it (the caller times
//                   out, or is killed while it waits)
//   --mode 5xx      count the request and answer --status (default 500)
//   --mode kill     count the request, then SIGKILL --kill-pid (the n8n
//                   process) before answering: a crash after the side effect
//
//   node test/n8n/sink.mjs --chat [--port 5691]
//                   a chat's incoming webhook instead (Slack-compatible
//                   {"text": ...}), for the alerts workflow: prints each message
//
//   GET /lookup?idempotency_key=orders:evt-1 returns the downstream's record
//   of the request that carried that Idempotency-Key header ({"id": ...}),
//   what an operator looks up before resolving a claim.
//
//   SIGUSR1 switches a running sink to --mode ok (the downstream recovers);
//   SIGUSR2 switches it back to the mode it started in.  GET /counts returns
//   the counts per event.  Every request and mode change is logged on stdout.
//
// Receipts ("id") are fx_<start>_<n>: <start> is a random prefix taken when
// the sink starts, so ids never repeat across starts.
import http from 'node:http';
import { randomBytes } from 'node:crypto';

const MODES = ['ok', 'refuse', 'hold', '5xx', 'kill'];

export function createSink({
  port,
  host = '127.0.0.1',
  delayMs = 300,
  mode = 'ok',
  status = 500,
  killPid = null,
  log = () => {},
} = {}) {
  if (!MODES.includes(mode)) throw new Error(`unknown sink mode ${mode} (${MODES.join(', ')})`);
  if (mode === 'kill' && !killPid) throw new Error('--mode kill needs --kill-pid');
  const counts = new Map();
  const byIdempotencyKey = new Map(); // the Idempotency-Key header -> the id answered (the downstream's record)
  const pathCounts = new Map(); // "path event" -> requests, to tell two URLs of one sink apart
  const held = new Map(); // event -> { arrived: Promise, notify, responses: [] }
  const holding = new Set(); // responses kept open by --mode hold
  const sockets = new Set();
  const prefix = `fx_${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  let server = null;
  let seq = 0;
  let current = mode;

  function handler(req, res) {
    if (req.method === 'GET' && req.url === '/counts') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(Object.fromEntries(counts)));
      return;
    }
    // the downstream's record of a side effect, looked up by the
    // Idempotency-Key the gate sent (<workflow>:<key>), as an operator does
    // before resolving a claim (docs/n8n.md "Operate the inbox")
    if (req.method === 'GET' && req.url.startsWith('/lookup?')) {
      const k = new URL(req.url, 'http://sink').searchParams.get('idempotency_key') ?? '';
      const found = byIdempotencyKey.get(k);
      res.writeHead(found ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(found ?? { error: 'no record for this Idempotency-Key' }));
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      let event = null;
      try {
        event = JSON.parse(body).event ?? null;
      } catch {}
      if (event === null) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{"error":"no event"}');
        return;
      }
      event = String(event);
      // the side effect happens when the request arrives
      counts.set(event, (counts.get(event) ?? 0) + 1);
      const pk = `${req.url} ${event}`;
      pathCounts.set(pk, (pathCounts.get(pk) ?? 0) + 1);
      seq += 1;
      const answer = { id: `${prefix}_${seq}`, event, n: counts.get(event) };
      const ik = req.headers['idempotency-key'];
      if (ik) byIdempotencyKey.set(String(ik), { id: answer.id, event, n: answer.n, path: req.url });
      log(`${req.method} ${req.url} event=${event} n=${answer.n} mode=${current}`);
      const h = held.get(event);
      if (h) {
        h.responses.push(res);
        h.notify();
        return;
      }
      if (current === 'hold') {
        holding.add(res);
        res.on('close', () => holding.delete(res));
        return;
      }
      if (current === 'kill') {
        try {
          process.kill(killPid, 'SIGKILL');
          log(`sent SIGKILL to ${killPid}`);
        } catch (e) {
          log(`could not kill ${killPid}: ${e.message}`);
        }
        holding.add(res);
        res.on('close', () => holding.delete(res));
        return;
      }
      const code = current === '5xx' ? status : 200;
      const out = current === '5xx' ? { error: 'downstream failure (sink --mode 5xx)', event } : answer;
      setTimeout(() => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(out));
      }, delayMs);
    });
  }

  async function listen() {
    if (server) return;
    server = http.createServer(handler);
    server.keepAliveTimeout = 1000;
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
  }
  // close the port: new connections are refused, open ones are cut
  async function close() {
    if (!server) return;
    const s = server;
    server = null;
    const closed = new Promise((resolve) => s.close(resolve));
    for (const sock of sockets) sock.destroy();
    await closed;
  }

  return {
    counts,
    prefix,
    get mode() {
      return current;
    },
    count(event) {
      return counts.get(String(event)) ?? 0;
    },
    // the requests for event that arrived at path (for example /charge)
    countAt(path, event) {
      return pathCounts.get(`${path} ${event}`) ?? 0;
    },
    // what the downstream recorded for an Idempotency-Key, or null
    lookup(idempotencyKey) {
      return byIdempotencyKey.get(String(idempotencyKey)) ?? null;
    },
    total() {
      let t = 0;
      for (const v of counts.values()) t += v;
      return t;
    },
    async start() {
      if (current !== 'refuse') await listen();
    },
    stop: close,
    // switch the failure mode of a running sink
    async setMode(m) {
      if (!MODES.includes(m)) throw new Error(`unknown sink mode ${m}`);
      current = m;
      if (m === 'refuse') await close();
      else await listen();
      if (m === 'ok') for (const res of holding) res.destroy();
    },
    // the next request for event is counted and then left unanswered
    hold(event) {
      let notify;
      const arrived = new Promise((resolve) => (notify = resolve));
      held.set(String(event), { arrived, notify, responses: [] });
      return arrived;
    },
    release(event) {
      const h = held.get(String(event));
      held.delete(String(event));
      if (h) for (const res of h.responses) res.destroy();
    },
  };
}

// A chat's incoming webhook (Slack-compatible: POST {"text": ...}): keeps the
// messages, answers "ok" like Slack does.  GET / returns them.  The alerts
// workflow (examples/n8n/alerts.json) posts here in the tests.
export function createChatSink({ port, host = '127.0.0.1', log = () => {} } = {}) {
  const messages = [];
  const waiters = [];
  let server = null;
  const handler = (req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(messages));
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      let text = null;
      try {
        text = JSON.parse(body).text ?? null;
      } catch {}
      if (typeof text !== 'string') {
        res.writeHead(400, { 'content-type': 'text/plain' });
        res.end('invalid_payload');
        return;
      }
      const m = { at: Date.now(), path: req.url, text };
      messages.push(m);
      log(`chat ${req.url}: ${text}`);
      for (const w of [...waiters]) if (w.pred(m)) w.resolve(m);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
    });
  };
  return {
    messages,
    async start() {
      server = http.createServer(handler);
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, resolve);
      });
    },
    async stop() {
      if (server) await new Promise((r) => server.close(r));
      server = null;
    },
    // the first message (from `since`, a time in ms) that pred accepts, or null after timeoutMs
    waitFor(pred, timeoutMs, since = 0) {
      const old = messages.find((m) => m.at >= since && pred(m));
      if (old) return Promise.resolve(old);
      return new Promise((resolve) => {
        const w = { pred: (m) => m.at >= since && pred(m), resolve: (m) => { clearTimeout(t); waiters.splice(waiters.indexOf(w), 1); resolve(m); } };
        const t = setTimeout(() => { waiters.splice(waiters.indexOf(w), 1); resolve(null); }, timeoutMs);
        waiters.push(w);
      });
    },
  };
}

// ------------------------------------------------------------ alone --
function parseArgs(argv) {
  const o = { port: 5690, host: '127.0.0.1', mode: 'ok', delay: 300, status: 500, killPid: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, null];
    const val = () => inline ?? argv[++i];
    if (flag === '--port') o.port = Number(val());
    else if (flag === '--host') o.host = val();
    else if (flag === '--mode') o.mode = val();
    else if (flag === '--delay') o.delay = Number(val());
    else if (flag === '--status') o.status = Number(val());
    else if (flag === '--kill-pid') o.killPid = Number(val());
    else if (flag === '--chat') o.chat = true;
    else if (/^\d+$/.test(a)) o.port = Number(a); // the former "sink.mjs PORT"
    else if (flag === '--help' || flag === '-h') o.help = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(o.port) || o.port < 1 || o.port > 65535) throw new Error('--port must be 1-65535');
  if (!Number.isInteger(o.status) || o.status < 500 || o.status > 599) throw new Error('--status must be 500-599');
  return o;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`sink: ${e.message}`);
    process.exit(2);
  }
  if (o.help) {
    console.log('usage: node test/n8n/sink.mjs [--port 5690] [--host 127.0.0.1] [--mode ok|refuse|hold|5xx|kill] [--delay 300] [--status 500] [--kill-pid PID] | --chat [--port 5691]');
    process.exit(0);
  }
  const stamp = () => new Date().toISOString().slice(11, 23);
  if (o.chat) {
    // a chat's incoming webhook for the alerts workflow: prints every message
    const chat = createChatSink({ port: o.port, host: o.host, log: (m) => console.log(`${stamp()} ${m}`) });
    await chat.start();
    console.log(`${stamp()} chat sink on http://${o.host}:${o.port}/ (POST {"text": ...}); GET / lists the messages`);
    setInterval(() => {}, 1 << 30);
  } else {
  let sink;
  try {
    sink = createSink({
      port: o.port,
      host: o.host,
      delayMs: o.delay,
      mode: o.mode,
      status: o.status,
      killPid: o.killPid,
      log: (m) => console.log(`${stamp()} ${m}`),
    });
    await sink.start();
  } catch (e) {
    console.error(`sink: ${e.message}`);
    process.exit(2);
  }
  const where = `${o.host}:${o.port}`;
  const say = () =>
    console.log(
      sink.mode === 'refuse'
        ? `${stamp()} sink refusing connections on ${where} (nothing listens); SIGUSR1 (kill -USR1 ${process.pid}) opens it`
        : `${stamp()} sink on http://${where}/ mode=${sink.mode}, receipts ${sink.prefix}_N; kill -USR1 ${process.pid} switches to ok`,
    );
  say();
  process.on('SIGUSR1', async () => {
    await sink.setMode('ok');
    say();
  });
  process.on('SIGUSR2', async () => {
    await sink.setMode(o.mode);
    say();
  });
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, async () => {
      await sink.stop();
      console.log(`${stamp()} counts ${JSON.stringify(Object.fromEntries(sink.counts))}`);
      process.exit(0);
    });
  }
  // keep the process alive in --mode refuse, where no server holds the loop
  setInterval(() => {}, 1 << 30);
  }
}
