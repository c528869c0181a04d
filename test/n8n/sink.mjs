// The external side effect of the drills: a small HTTP server on loopback that
// counts the requests it receives per event (the body's "event" member).
//
// Used in-process by drills.mjs; also runs alone for a manual try:
//   node test/n8n/sink.mjs 5690       # POST /charge {"event": "..."}; GET /counts
//
// Each request waits delayMs (default 300 ms) before answering, like a real
// payment or CRM call, so that concurrent claims really overlap.  hold(event)
// keeps the answer for that event back until release() (drill 6 kills n8n in
// that window); stop() closes the port so connections are refused (drill 5).
import http from 'node:http';

export function createSink({ port, host = '127.0.0.1', delayMs = 300 } = {}) {
  const counts = new Map();
  const held = new Map(); // event -> { arrived: Promise, notify, responses: [] }
  const sockets = new Set();
  let server = null;
  let seq = 0;

  function handler(req, res) {
    if (req.method === 'GET' && req.url === '/counts') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(Object.fromEntries(counts)));
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
      seq += 1;
      const answer = { id: `fx_${seq}`, event, n: counts.get(event) };
      const h = held.get(event);
      if (h) {
        h.responses.push(res);
        h.notify();
        return;
      }
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer));
      }, delayMs);
    });
  }

  return {
    counts,
    count(event) {
      return counts.get(String(event)) ?? 0;
    },
    total() {
      let t = 0;
      for (const v of counts.values()) t += v;
      return t;
    },
    async start() {
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
    },
    // close the port: new connections are refused, open ones are cut
    async stop() {
      if (!server) return;
      const s = server;
      server = null;
      const closed = new Promise((resolve) => s.close(resolve));
      for (const sock of sockets) sock.destroy();
      await closed;
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

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.argv[2] ?? 5690);
  const sink = createSink({ port });
  await sink.start();
  console.log(`sink listening on 127.0.0.1:${port}`);
}
