// The inbox's sign-in proxy for the drills: Debian's nginx with
// examples/nginx/inbox.conf as written, only its placeholders replaced (the
// listen line, n8n's address, the htpasswd file and the shared secret), and
// one htpasswd line per operator (openssl passwd -apr1, as docs/n8n.md
// says).  nginx runs in the foreground as one process (no workers) with
// every path under the work directory, on loopback.
//
//   NGINX=/path/to/nginx   the binary (default: nginx on PATH, /usr/sbin/nginx)
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function fill(text, placeholder, value) {
  if (!text.includes(placeholder)) throw new Error(`examples/nginx/inbox.conf: the placeholder ${placeholder} is gone`);
  return text.split(placeholder).join(value);
}

export function nginxBinary() {
  if (process.env.NGINX) return process.env.NGINX;
  for (const p of ['/usr/sbin/nginx']) if (existsSync(p)) return p;
  return 'nginx';
}

// start nginx in front of n8n (base: n8n's address); operators: [{ user, password }]
export async function startProxy({ root, work, port, base, secret, operators, log }) {
  const dir = join(work, 'nginx');
  for (const d of ['', 'tmp', 'logs']) mkdirSync(join(dir, d), { recursive: true });
  const htpasswd = join(dir, 'inbox.htpasswd');
  writeFileSync(htpasswd, operators.map((o) =>
    `${o.user}:${execFileSync('openssl', ['passwd', '-apr1', o.password]).toString().trim()}\n`).join(''));
  let conf = readFileSync(join(root, 'examples/nginx/inbox.conf'), 'utf8');
  conf = fill(conf, 'listen 8443;', `listen 127.0.0.1:${port};`);
  conf = fill(conf, 'http://127.0.0.1:5678', base);
  conf = fill(conf, '/etc/nginx/idem-gate-inbox.htpasswd', htpasswd);
  conf = fill(conf, '"change-me-too"', `"${secret}"`);
  writeFileSync(join(dir, 'inbox.conf'), conf);
  const t = join(dir, 'tmp');
  writeFileSync(join(dir, 'nginx.conf'),
    `daemon off;\nmaster_process off;\npid ${join(dir, 'nginx.pid')};\nerror_log ${join(dir, 'logs/error.log')} warn;\n` +
    `events { worker_connections 256; }\nhttp {\n  access_log ${join(dir, 'logs/access.log')};\n` +
    `  client_body_temp_path ${t}/body;\n  proxy_temp_path ${t}/proxy;\n  fastcgi_temp_path ${t}/fastcgi;\n` +
    `  uwsgi_temp_path ${t}/uwsgi;\n  scgi_temp_path ${t}/scgi;\n  include ${join(dir, 'inbox.conf')};\n}\n`);
  const bin = nginxBinary();
  const child = spawn(bin, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 50; i++) {
    await sleep(100);
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
    try {
      const r = await fetch(`${url}/webhook/idem-gate/inbox`);
      if (r.status === 401) break;
    } catch {
      // not listening yet
    }
  }
  log?.(`nginx (${bin}) in front of the inbox on ${url}, operators ${operators.map((o) => o.user).join(', ')}`);
  return {
    url,
    inbox: `${url}/webhook/idem-gate/inbox`,
    async stop() {
      child.kill('SIGTERM');
      for (let i = 0; i < 30 && child.exitCode === null; i++) await sleep(100);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
