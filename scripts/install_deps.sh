#!/usr/bin/env bash
# Installs gandiva's build and run dependencies from Debian's packages.
# Idempotent: installs only what is missing, and runs apt-get update at most once.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  ccache                  # the Makefile compiles through it where it is installed
  clang-format git        # make format-check (CI)
  clang-14 libclang-rt-14-dev  # make fuzz: libFuzzer and the sanitizers' runtimes
  libzmq3-dev cppzmq-dev  # ZeroMQ + cppzmq: controller API and migration streams
  libsodium-dev           # CURVE keys for authenticated TCP endpoints
  libssl-dev              # libcrypto: AES-256-GCM bulk frames, GMAC chunk tags, random keys
  nlohmann-json3-dev      # JSON encoding of the API messages
  libsqlite3-dev          # the live scheduler's job store (scheduler/live)
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-pybind11 python3-dev python3-pytest python3-numpy
  python3-torch libtorch-dev
  libopenblas0-pthread    # Debian's torch is ~25x slower on the reference BLAS
  python3-matplotlib      # simulator plots
  python3-cryptography    # tests/integration: a migration's source written in Python (AES-256-GCM)
  iproute2                # network namespaces for multi-node tests
  runc                    # tests/integration/test_containers.py, tests/k8s: jobs in real containers
  prometheus              # promtool: tests check gandivad's metrics scrape
  slurmctld slurmd slurm-client munge libslurm-dev  # the Slurm plugin (spank.h) and a real Slurm for its tests
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc  # the Kubernetes device plugin (k8s/, optional)
  python3-grpcio python3-protobuf  # tests/k8s: the kubelet stand-in
  python3-jsonschema python3-yaml  # tests/k8s: the CDI spec against its schema, the manifests
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
