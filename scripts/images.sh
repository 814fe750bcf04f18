#!/usr/bin/env bash
# Builds one container image per shipped binary: FROM scratch, the binary
# statically linked, the CA bundle, user 65532:65532, OCI labels, the binary
# as entrypoint. Uses podman when installed, else docker.
#
#   scripts/images.sh                       release build, images tagged with the workspace version
#   scripts/images.sh --push REGISTRY       ... and push them to REGISTRY/cosi-rs/<binary>:<version>
#
# Options:
#   --push REGISTRY   push every image after building it (a registry on
#                     localhost or 127.0.0.1 is reached without TLS)
#   --tag TAG         tag images TAG instead of the workspace version
#   --dev             build the binaries with the dev profile into
#                     target/static instead of a release build (what the
#                     container tests use: quick to rebuild, larger images)
#   --state-dir DIR   podman's configuration and image storage
#                     [default: target/images/podman]
#   --system          use podman's own configuration and storage (images
#                     then show in `podman images`)
#
# podman runs with its configuration in --state-dir unless CONTAINERS_CONF
# is already set or --system is given, so nothing on the host changes: runc,
# cgroupfs, events in a file, vfs storage, file locks and lowered nofile and
# nproc limits work on any Linux host, with or without systemd. Each image's
# size is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

# One line per image: the binary it ships (its image is cosi-rs/<binary>).
BINARIES=(
  cosi-controller
  cosi-sidecar
  cosi-driver-local
  cosi-driver-s3
  cosi-driver-ceph-rgw
  cosi-driver-azure
  cosi
)

TARGET=x86_64-unknown-linux-gnu
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
push=""
tag=""
profile=release
state_dir=target/images/podman
system=false

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --push) push="${2:?--push needs a registry}"; shift 2 ;;
    --tag) tag="${2:?--tag needs a tag}"; shift 2 ;;
    --dev) profile=dev; shift ;;
    --state-dir) state_dir="${2:?--state-dir needs a directory}"; shift 2 ;;
    --system) system=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "images.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# A key of [workspace.package] in Cargo.toml.
workspace_key() {
  sed -n '/^\[workspace\.package\]/,/^\[/s/^'"$1"' *= *"\(.*\)"/\1/p' Cargo.toml
}
version="$(workspace_key version)"
source_url="$(workspace_key repository)"
licenses="$(workspace_key license)"
tag="${tag:-$version}"

if command -v podman >/dev/null; then
  engine=podman
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=docker
else
  echo "images.sh: neither podman nor a running docker found; on Debian: apt-get install podman runc" >&2
  exit 1
fi
[[ -r "$CA_BUNDLE" ]] || { echo "images.sh: $CA_BUNDLE missing; on Debian: apt-get install ca-certificates" >&2; exit 1; }

if [[ $engine == podman && $system == false && -z "${CONTAINERS_CONF:-}" ]]; then
  mkdir -p "$state_dir"
  state="$(cd "$state_dir" && pwd)"
  mkdir -p "$state/tmp" "$state/net"
  cat > "$state/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$state/events.log"
lock_type = "file"
tmp_dir = "$state/tmp"
static_dir = "$state/libpod"
volume_path = "$state/volumes"
[network]
network_config_dir = "$state/net"
EOF
  cat > "$state/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$state/storage"
runroot = "$state/run"
EOF
  export CONTAINERS_CONF="$state/containers.conf" CONTAINERS_STORAGE_CONF="$state/storage.conf"
fi

# Static binaries: the explicit --target keeps build scripts and proc-macros
# dynamic while everything shipped links glibc statically. Name lookup still
# works in a scratch image: glibc (2.34 and later) has its files and dns
# lookups built in, so /etc/hosts and /etc/resolv.conf are read without
# loading NSS modules.
bin_args=()
for b in "${BINARIES[@]}"; do bin_args+=(--bin "$b"); done
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static"
if [[ $profile == release ]]; then
  start=$SECONDS
  CARGO_PROFILE_RELEASE_STRIP=symbols cargo build --release --locked --target "$TARGET" "${bin_args[@]}"
  bin_dir="target/$TARGET/release"
  echo "release build: $((SECONDS - start)) s" >&2
else
  CARGO_PROFILE_DEV_STRIP=symbols cargo build --locked --target "$TARGET" --target-dir target/static "${bin_args[@]}"
  bin_dir="target/static/$TARGET/debug"
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp "$CA_BUNDLE" "$context/ca-certificates.crt"
sizes=()
for b in "${BINARIES[@]}"; do
  image="cosi-rs/$b:$tag"
  cp "$bin_dir/$b" "$context/$b"
  cat > "$context/Containerfile" <<EOF
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY $b /usr/local/bin/$b
USER 65532:65532
LABEL org.opencontainers.image.title="$b" \\
      org.opencontainers.image.source="$source_url" \\
      org.opencontainers.image.version="$version" \\
      org.opencontainers.image.licenses="$licenses"
ENTRYPOINT ["/usr/local/bin/$b"]
EOF
  "$engine" build --quiet --file "$context/Containerfile" --tag "$image" "$context" >/dev/null
  rm "$context/$b"
  bytes="$("$engine" image inspect --format '{{.Size}}' "$image")"
  sizes+=("$(printf '%-32s %6.1f MB' "$image" "$(awk "BEGIN {print $bytes / 1000000}")")")
  if [[ -n $push ]]; then
    remote="$push/$image"
    "$engine" tag "$image" "$remote"
    tls=()
    if [[ $engine == podman && $push =~ ^(localhost|127\.0\.0\.1)(:|$) ]]; then tls=(--tls-verify=false); fi
    "$engine" push --quiet "${tls[@]}" "$remote" >/dev/null
    echo "pushed $remote" >&2
  fi
done
printf '%s\n' "${sizes[@]}"
