# Shell functions to run a throwaway n8n on loopback as the end-to-end drills
# run it (test/n8n/e2e.sh and drills.mjs): the pinned n8n and its Node from
# install_n8n.sh, the environment of drills.mjs (a fresh home, loopback
# addresses, SQLite, docs/n8n.md's run:n8n-offline variables as the docs
# give them), and the documented import blocks run as written.  Source it:
#
#   . test/n8n/n8n_lib.sh
#   n8n_install                       # N8N_VERSION (default the newest pin)
#   n8n_setup DIR PORT BROKER_PORT    # n8n's home in DIR, its ports
#   n8n_env_add FROM NAME=value...    # more settings for n8n
#   n8n_doc_sh NAME                   # a docs/n8n.md sh block, `n8n` = n8n_cli
#   n8n_start; n8n_wait_url URL; n8n_stop
#
# Used by bench/inbox/run.sh.  Needs bash, node, curl; run as root (like
# e2e.sh) or as a user who can write N8N_CACHE.
N8N_LIB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
N8N_LIB_ROOT=$(cd "$N8N_LIB_HERE/../.." && pwd)

# n8n_install: the pinned n8n and the Node it runs on, into their caches
# (install_n8n.sh); sets N8N_VERSION, N8N_CACHE, N8N_BIN and N8N_NODE_DIR
n8n_install() {
	export N8N_VERSION="${N8N_VERSION:-$("$N8N_LIB_HERE/install_n8n.sh" --pins | awk '{print $NF}')}"
	export N8N_CACHE="${N8N_CACHE:-/var/cache/idem_gate/n8n-$N8N_VERSION}"
	"$N8N_LIB_HERE/install_n8n.sh" >&2
	N8N_BIN="$N8N_CACHE/node_modules/.bin/n8n"
	N8N_NODE_DIR=$(cat "$N8N_CACHE/n8n-path")
}

# n8n_setup DIR PORT BROKER_PORT: the environment n8n and its CLI run with,
# in the array N8N_ENV; its home, log and pid file in DIR
n8n_setup() {
	N8N_DIR=$1 N8N_PORT=$2
	local broker=$3 base="http://127.0.0.1:$2/" line
	mkdir -p "$N8N_DIR/n8n-home"
	N8N_ENV=(
		N8N_USER_FOLDER="$N8N_DIR/n8n-home"
		N8N_ENCRYPTION_KEY=idem-gate-throwaway-key
		N8N_LISTEN_ADDRESS=127.0.0.1 N8N_HOST=127.0.0.1 N8N_PORT="$2" N8N_PROTOCOL=http
		WEBHOOK_URL="$base" N8N_WEBHOOK_URL="$base" N8N_EDITOR_BASE_URL="$base"
		N8N_RUNNERS_BROKER_PORT="$broker" N8N_RUNNERS_BROKER_LISTEN_ADDRESS=127.0.0.1
		N8N_SECURE_COOKIE=false N8N_LOG_LEVEL=warn N8N_LOG_OUTPUT=console
		EXECUTIONS_MODE=regular DB_TYPE=sqlite NODE_OPTIONS=--max-old-space-size=2048
		PATH="$N8N_NODE_DIR:$(dirname "$N8N_BIN"):$PATH"
	)
	# docs/n8n.md run:n8n-offline: NAME=value lines, as the docs give them
	while IFS= read -r line; do
		case "$line" in '' | '#'*) continue ;; esac
		n8n_env_add "docs/n8n.md run:n8n-offline" "$line" || return 1
	done < <(node "$N8N_LIB_HERE/doc_block.mjs" "$N8N_LIB_ROOT/docs/n8n.md" n8n-offline)
	# n8n 2.40 and later poll api.n8n.io for their MCP server registry
	[ -d "$(dirname "$N8N_BIN")/../n8n/dist/modules/mcp-registry" ] && N8N_ENV+=(N8N_DISABLED_MODULES=mcp-registry)
	return 0
}

# n8n_env_add FROM SETTING...: settings added to n8n's environment (after
# n8n_setup), each refused unless it is NAME=value; FROM names where they
# came from in the refusal
n8n_env_add() {
	local from=$1 setting
	shift
	for setting; do
		[[ "$setting" =~ ^[A-Z_][A-Z0-9_]*= ]] || { echo "$from: not NAME=value: $setting" >&2; return 1; }
		N8N_ENV+=("$setting")
	done
}

# n8n_cli ARGS...: the n8n CLI in n8n's environment (no libpq variables)
n8n_cli() {
	env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE "${N8N_ENV[@]}" "$N8N_BIN" "$@"
}

# n8n_doc_sh NAME: docs/n8n.md's sh block NAME run as written, from the
# current directory, its `n8n` commands this n8n's CLI
n8n_doc_sh() {
	local script
	script=$(node "$N8N_LIB_HERE/doc_block.mjs" "$N8N_LIB_ROOT/docs/n8n.md" "$1") || return 1
	bash -euo pipefail -c "$(declare -p N8N_ENV N8N_BIN); $(declare -f n8n_cli); n8n() { n8n_cli \"\$@\"; }"$'\n'"$script"
}

# n8n_start: n8n in the background, the leader of its own process group
n8n_start() {
	setsid env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE "${N8N_ENV[@]}" "$N8N_BIN" start \
		>>"$N8N_DIR/n8n.log" 2>&1 </dev/null &
	echo $! >"$N8N_DIR/n8n.pid"
}

# n8n_wait_url URL [CURL ARGS...]: until URL answers 200 (3 minutes at most)
n8n_wait_url() {
	local url=$1 i
	shift
	for i in $(seq 360); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$@" "$url" || true)" = 200 ] && return 0
		if ! kill -0 "$(cat "$N8N_DIR/n8n.pid")" 2>/dev/null; then
			echo "n8n exited; its log:" >&2
			tail -20 "$N8N_DIR/n8n.log" >&2
			return 1
		fi
		sleep 0.5
	done
	echo "$url did not answer 200 within 3 minutes; n8n's log: $N8N_DIR/n8n.log" >&2
	return 1
}

# n8n_stop: n8n and its task runners (its process group)
n8n_stop() {
	local p
	[ -n "${N8N_DIR:-}" ] && [ -f "$N8N_DIR/n8n.pid" ] || return 0
	p=$(cat "$N8N_DIR/n8n.pid")
	kill -TERM -- "-$p" 2>/dev/null || true
	for _ in $(seq 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
	kill -KILL -- "-$p" 2>/dev/null || true
	rm -f "$N8N_DIR/n8n.pid"
}
