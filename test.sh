#!/usr/bin/env bash
# The project's test command (README, Quick start; CI runs exactly this).
# It installs what the tests need that Go does not bring, then runs
# go vet, golangci-lint and the race-enabled test suite: the unit tests and the
# whole-system tests, which build only with the tag e2e (docs/testing.md; plain
# `go test ./...` runs the unit tests alone). Extra arguments go to go test,
# e.g. ./test.sh -run Walkthrough ./cmd/adpnode/
set -euo pipefail
cd "$(dirname "$0")"

need=()
# The web viewer's acceptance tests drive headless Chromium (hostapi).
if [ -z "${ADP_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ] && [ "${ADP_SKIP_BROWSER:-}" != 1 ]; then
	need+=(chromium)
fi
# The guides' shell blocks run curl, and the TLS one openssl (cmd/adpnode TestGuides).
if ! command -v curl >/dev/null 2>&1; then
	need+=(curl)
fi
if ! command -v openssl >/dev/null 2>&1; then
	need+=(openssl)
fi
# The MCP server's client test drives it with the official TypeScript SDK
# (adpmcp/tsclient), which needs Node.js (18 or later) and npm.
if [ "${ADP_SKIP_NODE:-}" != 1 ]; then
	command -v node >/dev/null 2>&1 || need+=(nodejs)
	command -v npm >/dev/null 2>&1 || need+=(npm)
fi
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -eq 0 ]; then
		as_root=()
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		as_root=(sudo)
	else
		echo "test.sh: the tests need ${need[*]}, which is not installed, and installing it needs" >&2
		echo "test.sh: root or password-less sudo. Install it yourself (Debian: apt-get install ${need[*]})," >&2
		echo "test.sh: or point ADP_CHROMIUM at a Chromium binary, or set ADP_SKIP_BROWSER=1 to skip the browser tests," >&2
		echo "test.sh: or ADP_SKIP_NODE=1 to skip the MCP client test that needs Node.js." >&2
		exit 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "test.sh: the tests need ${need[*]}; this is not a Debian-like system (no apt-get): install it yourself." >&2
		exit 1
	fi
	echo "test.sh: installing ${need[*]} with apt-get" >&2
	"${as_root[@]}" apt-get update
	DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y --no-install-recommends "${need[@]}"
fi

# The MCP client test's npm packages, pinned by adpmcp/tsclient/package-lock.json,
# go into adpmcp/tsclient/node_modules; a copy of the lock file there tells
# that they are installed and current.
if [ "${ADP_SKIP_NODE:-}" != 1 ]; then
	ts=adpmcp/tsclient
	if ! cmp -s "$ts/package-lock.json" "$ts/node_modules/.adp-installed-lock.json"; then
		echo "test.sh: installing the MCP client test's npm packages into $ts/node_modules" >&2
		(cd "$ts" && npm ci --no-audit --no-fund --loglevel=error)
		cp "$ts/package-lock.json" "$ts/node_modules/.adp-installed-lock.json"
	fi
fi

go version
# Both builds: the unit tests alone must compile without the tag.
go vet ./...
go vet -tags e2e ./...
# Without a package argument, test every package.
pkgs=./...
for a in "$@"; do
	case "$a" in ./* | github.com/*) pkgs= ;; esac
done
# When the whole suite runs: the linters of .golangci.yml (with the e2e tag), built by go run at a
# pinned version (the build is cached by Go, the analysis under the user cache
# dir), and the host log's tile-crossing test, which proves every record of
# 70,500 leaves only without the race detector (under -race tessera needs
# minutes for them and the test uses 2,600).
if [ -n "$pkgs" ]; then
	export GOLANGCI_LINT_CACHE="${GOLANGCI_LINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/golangci-lint}"
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run ./...
	go test -count=1 -run '^TestEveryRecordProvesAcrossTiles$' ./hostlog
fi
# Under -race the node and mirror packages take minutes each on 2 cores;
# the default 10 min per package is too tight when packages run side by side.
exec go test -race -tags e2e -timeout 25m "$@" $pkgs
