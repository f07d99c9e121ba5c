#!/usr/bin/env bash
# Run the MCP conformance suite's server scenarios against a real pruner child.
# Usage: tests/conformance/run.sh [scenario ...]   (default: the scenarios that need no test-only tools)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
prefix="$top/.conformance"
python="${PYTHON:-$top/.venv/bin/python}"
version=0.1.16
scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(server-initialize tools-list ping dns-rebinding-protection tools-call-error
             server-sse-multiple-streams resources-list prompts-list)
fi

# The suite needs Node 22; the npm package node@22 ships the binary.
if [ ! -x "$prefix/node_modules/.bin/conformance" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
    node@22 "@modelcontextprotocol/conformance@$version" >/dev/null
fi
export PATH="$prefix/node_modules/.bin:$PATH"

root=$(mktemp -d)
ready=$(mktemp)
cleanup() {
  if [ -n "${child:-}" ]; then
    kill -TERM -- "-$child" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$child" 2>/dev/null || true
  fi
  rm -rf "$root" "$ready"
}
trap cleanup EXIT

echo "hello" > "$root/README.md"
env -u JEEVES_MCP_TOKEN setsid "$python" -m jeeves_mcp pruner --root "$root" --port 0 \
  >"$ready" 2>"$root/child.log" &
child=$!
for _ in $(seq 200); do [ -s "$ready" ] && break; sleep 0.05; done
url=$("$python" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["url"])' "$ready")
echo "conformance $version against $url"

failed=0
for scenario in "${scenarios[@]}"; do
  if out=$(conformance server --url "$url" --scenario "$scenario" 2>&1); then
    echo "PASS $scenario: $(echo "$out" | grep -Eo 'Passed: .*' | tail -1)"
  else
    echo "FAIL $scenario"
    echo "$out" | tail -30
    failed=$((failed + 1))
  fi
done
echo "conformance: $(( ${#scenarios[@]} - failed )) passed, $failed failed"
[ "$failed" -eq 0 ]
