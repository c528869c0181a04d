#!/usr/bin/env bash
# Install the pinned n8n into a reusable cache directory (not part of CI).
#   N8N_VERSION   default 2.8.4 (newest 2.x whose engines accept Node 20)
#   N8N_CACHE     default /var/cache/idem_gate/n8n-$N8N_VERSION
# Re-running is cheap: an existing complete install is reused.
set -euo pipefail
N8N_VERSION="${N8N_VERSION:-2.8.4}"
N8N_CACHE="${N8N_CACHE:-/var/cache/idem_gate/n8n-$N8N_VERSION}"

if [ -x "$N8N_CACHE/node_modules/.bin/n8n" ] && [ -f "$N8N_CACHE/.complete" ]; then
  echo "n8n $N8N_VERSION already installed in $N8N_CACHE"
  exit 0
fi

if ! command -v node >/dev/null 2>&1; then
  apt-get install -y nodejs npm
fi
# sqlite3 is built from source against the system's node headers (no prebuilt download)
if [ ! -f /usr/include/node/node.h ]; then apt-get install -y libnode-dev; fi
for t in g++ make python3; do
  command -v "$t" >/dev/null 2>&1 || apt-get install -y g++ make python3
done

mkdir -p "$N8N_CACHE"
cd "$N8N_CACHE"
cat > package.json <<JSON
{
  "name": "idem-gate-n8n-runtime",
  "private": true,
  "description": "pinned n8n for the idem_gate end-to-end drills",
  "dependencies": { "n8n": "$N8N_VERSION" },
  "overrides": { "xlsx": "0.18.5" },
  "allowScripts": { "sqlite3@5.1.7": true }
}
JSON
echo "installing n8n $N8N_VERSION into $N8N_CACHE (takes 6-10 minutes, ~2 GB)"
npm_config_nodedir=/usr npm install --no-audit --no-fund --loglevel=warn
"$N8N_CACHE/node_modules/.bin/n8n" --version
touch "$N8N_CACHE/.complete"
