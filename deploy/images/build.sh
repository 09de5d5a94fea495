#!/usr/bin/env bash
# `make images`: build raybus's container images with podman on this machine.
#   raybus:latest      the runtime image: every service (`python -m <service>` / raybus-<service>),
#                      runtime dependencies only, non-root
#   raybus-dev:latest  the runtime image plus the simulator (raybus_sim: local API server,
#                      simulated kubelet and Ray heads), the dev tools and nats-server/redis-server
# Installs podman + runc when missing and, where no container registry answers, builds the
# base image itself (debootstrap bookworm: its python3 is 3.11, as python:3.11-slim).
set -euo pipefail
cd "$(dirname "$0")/../.."

BASE_LOCAL=localhost/raybus-base:bookworm
BASE_OFFICIAL=docker.io/library/python:3.11-slim
log() { echo "images: $*" >&2; }

ensure_tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  command -v podman-compose >/dev/null || missing+=(podman-compose)
  if ((${#missing[@]})); then
    log "installing ${missing[*]} (apt-get)"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc podman-compose
  fi
}

# crun fails here (cgroup v1 hybrid mode): runc. The default nofile/nproc limits of such hosts are
# too low for nats-server and for Python's thread pools, so every container gets these.
ensure_containers_conf() {
  local conf=/etc/containers/containers.conf
  if grep -q "raybus defaults" "$conf" 2>/dev/null; then return; fi
  if [[ -s $conf ]]; then
    log "$conf exists without raybus defaults; leaving it (containers need runtime=runc and"
    log "  default_ulimits nofile=20000:20000, nproc=32768:32768 on cgroup v1 hosts)"
    return
  fi
  log "writing $conf (runtime runc, ulimits)"
  mkdir -p /etc/containers
  cat >"$conf" <<'CONF'
# raybus defaults (deploy/images/build.sh): runc, since crun fails on cgroup v1 hybrid hosts,
# and limits high enough for nats-server and Python's thread pools.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
CONF
}

# A registry that answers within seconds: the official image; otherwise a base made here.
pick_base() {
  if [[ -n ${BASE:-} ]]; then echo "$BASE"; return; fi
  if podman image exists "$BASE_OFFICIAL" || timeout 60 podman pull -q "$BASE_OFFICIAL" >/dev/null 2>&1; then
    echo "$BASE_OFFICIAL"; return
  fi
  if ! podman image exists "$BASE_LOCAL"; then
    make_local_base >&2
  fi
  echo "$BASE_LOCAL"
}

make_local_base() {
  log "no registry reachable: building $BASE_LOCAL with debootstrap (bookworm, minbase)"
  command -v debootstrap >/dev/null || {
    apt-get update -q; DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
  local root; root=$(mktemp -d /var/tmp/raybus-base.XXXXXX)
  # A RETURN trap outlives the function: cleared on its first run, or it fires again when the
  # caller returns, where `root` is unset (set -u: "root: unbound variable").
  trap 'rm -rf "${root:-}"; trap - RETURN' RETURN
  local mirror; mirror=${DEBIAN_MIRROR:-$(awk '/^URIs:/{print $2; exit} /^deb /{print $2; exit}' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)}
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$root" "${mirror:-http://deb.debian.org/debian}"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/*
  tar -C "$root" -c . | podman import \
    --change 'CMD ["python3"]' --change 'ENV LANG=C.UTF-8' - "$BASE_LOCAL"
}

# Where the build container cannot reach PyPI itself (no registry usually means a sandbox whose
# egress needs the host's CA), pip downloads the locked wheels on the host (same Python 3.11,
# same glibc) and the build installs them with --no-index.
fill_wheelhouse() {
  local pip=${PIP:-.venv/bin/pip}
  log "downloading the locked wheels into deploy/images/wheelhouse"
  # markers dropped: the pins for the base's Python (3.11.2) too, whatever Python runs pip here
  sed 's/;.*//' requirements.lock > deploy/images/wheelhouse/requirements.txt
  "$pip" download -q -d deploy/images/wheelhouse -r deploy/images/wheelhouse/requirements.txt 'setuptools>=68'
}

main() {
  ensure_tools
  ensure_containers_conf
  local base; base=$(pick_base)
  log "base image: $base"
  local start=$SECONDS pip_opts=""
  if [[ $base == "$BASE_LOCAL" || -n ${WHEELHOUSE:-} ]]; then
    fill_wheelhouse
    pip_opts="--no-index --find-links=/wheelhouse"
  fi
  for target in runtime dev; do
    local tag=localhost/raybus:latest
    [[ $target == dev ]] && tag=localhost/raybus-dev:latest
    log "building $tag (target $target)"
    podman build --build-arg "BASE=$base" --build-arg "PIP_OPTS=$pip_opts" --target "$target" -t "$tag" -f deploy/images/Dockerfile .
  done
  log "built in $((SECONDS - start)) s:"
  podman images --filter reference=localhost/raybus --filter reference=localhost/raybus-dev \
    --format '{{.Repository}}:{{.Tag}} {{.Size}}' >&2
}

if [[ ${1:-} == base ]]; then ensure_tools; ensure_containers_conf; pick_base; else main "$@"; fi
