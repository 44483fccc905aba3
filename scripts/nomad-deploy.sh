#!/usr/bin/env bash
# Deploys one service's release to Nomad with deploy/nomad/switchyard.nomad.hcl:
#
#   scripts/nomad-deploy.sh SERVICE ARTIFACT_BASE SUMS [nomad job run flags...]
#
# SUMS is the release's SHA256SUMS (make release writes it beside the
# archives); the service's version and checksum come from its line
# <service>-<version>-linux-<arch>.tar.gz, unless VERSION and CHECKSUM are
# set in the environment. Before anything is submitted, the job file's
# own validation (version, checksum, URL scheme) runs on the rendered
# job, then the archive's URL, ARTIFACT_BASE/<archive>, must answer:
# Nomad would accept the job and fail only later, on the client, at
# download. With mutual TLS on (the job's default; -var tls=false turns
# it off), the certificates must be in the Nomad Variables the job's
# templates read (items tls_ca, tls_cert and tls_key of
# nomad/jobs/<job> or nomad/jobs): without them the job would be
# accepted and its tasks would fail to start. Other flags (e.g. -var
# count=1, -detach) go to `nomad job run`; NOMAD_ADDR says which Nomad.
#
# -preserve-counts keeps a group's count as the planner (or an operator)
# left it when a new version is deployed; a first run takes the file's.
set -euo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 SERVICE ARTIFACT_BASE SHA256SUMS [nomad job run flags...]" >&2
  exit 2
fi
svc=$1 base=${2%/} sums=$3
shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
nomad=${NOMAD_BIN:-nomad}
arch=${ARCH:-amd64}

version=${VERSION:-} checksum=${CHECKSUM:-}
if [ -z "$version" ] || [ -z "$checksum" ]; then
  [ -r "$sums" ] || { echo "nomad-deploy: $sums: no such file (make release writes it)" >&2; exit 1; }
  line=$(grep -E "  ${svc}-[^-]+(-[0-9A-Za-z.-]+)?-linux-${arch}\.tar\.gz$" "$sums" | head -1 || true)
  [ -n "$line" ] || { echo "nomad-deploy: no ${svc} linux-${arch} archive in $sums" >&2; exit 1; }
  file=${line##* }
  rest=${file#"$svc"-}
  version=${version:-${rest%-linux-"$arch".tar.gz}}
  checksum=${checksum:-${line%% *}}
fi

# The job file's validation first (rendered locally, nothing submitted),
# so a malformed variable is reported as such, not as a missing archive.
vars=(-var "service=$svc" -var "version=$version" -var "checksum=$checksum" -var "artifact_base=$base" -var "arch=$arch")
job=$root/deploy/nomad/switchyard.nomad.hcl
if ! out=$("$nomad" job run -output "${vars[@]}" "$@" "$job" 2>&1 >/dev/null); then
  echo "nomad-deploy: $svc: the job file refuses its variables; nothing deployed:" >&2
  echo "$out" >&2
  exit 1
fi

# A HEAD answered with 2xx: the archive is there and servable.
url="$base/$svc-$version-linux-$arch.tar.gz"
if ! err=$(curl -fsS -o /dev/null -I --max-time 10 "$url" 2>&1); then
  echo "nomad-deploy: artifact $url does not answer ($err); nothing deployed" >&2
  exit 1
fi

# tls: the last -var tls=... among the flags wins, as in nomad job run.
tls=true
prev=
for a in "$@"; do
  case $prev:$a in
    -var:tls=* | --var:tls=*) tls=${a#tls=} ;;
  esac
  case $a in
    -var=tls=* | --var=tls=*) tls=${a#*=tls=} ;;
  esac
  prev=$a
done
if [ "$tls" = true ]; then
  jobvar=nomad/jobs/switchyard-$svc
  missing=()
  # has PATH ITEM: the Variable at PATH has a non-empty ITEM.
  has() { local v; v=$("$nomad" var get -item "$2" "$1" 2>/dev/null) && [ -n "$v" ]; }
  for item in tls_ca tls_cert tls_key; do
    has "$jobvar" "$item" || has nomad/jobs "$item" || missing+=("$item")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "nomad-deploy: $svc: TLS is on but the Nomad Variables $jobvar and nomad/jobs have no ${missing[*]}; nothing deployed." >&2
    echo "  Store the mesh certificates first (deploy/nomad/README.md, TLS), e.g." >&2
    echo "  nomad var put nomad/jobs tls_ca=@ca.crt tls_cert=@node.crt tls_key=@node.key" >&2
    echo "  or deploy plaintext with -var tls=false." >&2
    exit 1
  fi
fi

exec "$nomad" job run -preserve-counts "${vars[@]}" "$@" "$job"
