#!/usr/bin/env bash
# Lays out (idempotently) a "CUDA 12.9 NVRTC toolkit" directory from three pinned PyPI wheels
# (x86_64 Linux builds; the fatbins it makes run on any host),
# for `kiln build --toolkits nvrtc:DIR` (docs/packager.md, "Toolkits"):
#   nvidia-cuda-nvrtc-cu12 12.9.86    libnvrtc.so.12 and its builtins
#   nvidia-cuda-nvcc-cu12 12.9.86     ptxas, libdevice, libnvvm, the crt headers (no nvcc binary)
#   nvidia-cuda-runtime-cu12 12.9.79  the runtime headers (cuda_fp16.h, cuda_bf16.h, ...)
#   scripts/nvrtc_toolkit.sh [DIR]    DIR defaults to build/nvrtc-12.9 (under the repo root)
# The layout is a CUDA install's: DIR/bin/ptxas, DIR/lib64/libnvrtc.so.12, DIR/include,
# DIR/nvvm/libdevice, and DIR/version.json naming each component's full version (kiln reads the
# toolkit's identity from it). Each wheel is checked against its pinned sha256 before use; a
# directory already complete for these pins is left as it is. Prints DIR's absolute path, for
#   KILN_TEST_NVRTC_TOOLKIT=$(scripts/nvrtc_toolkit.sh) ctest -R Nvrtc
# PYTHON picks the interpreter of the venv (DIR/.pip-venv) whose pip downloads (default
# python3); the wheels are kept in DIR/.wheels so a second run downloads nothing.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$repo/build/nvrtc-12.9}"
python="${PYTHON:-python3}"

nvrtc_version="12.9.86"
nvcc_version="12.9.86"
runtime_version="12.9.79"
nvrtc_wheel="nvidia_cuda_nvrtc_cu12-$nvrtc_version-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl"
nvrtc_sha256="210cf05005a447e29214e9ce50851e83fc5f4358df8b453155d5e1918094dcb4"
nvcc_wheel="nvidia_cuda_nvcc_cu12-$nvcc_version-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl"
nvcc_sha256="5d6a0d32fdc7ea39917c20065614ae93add6f577d840233237ff08e9a38f58f0"
runtime_wheel="nvidia_cuda_runtime_cu12-$runtime_version-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
runtime_sha256="25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3"

stamp="nvrtc $nvrtc_version $nvrtc_sha256 nvcc $nvcc_version $nvcc_sha256 runtime $runtime_version $runtime_sha256 layout 1"
if [ -f "$dir/.kiln-toolkit" ] && [ "$(cat "$dir/.kiln-toolkit")" = "$stamp" ]; then
  cd "$dir" && pwd
  exit 0
fi

mkdir -p "$dir/.wheels"
wheels="$(cd "$dir/.wheels" && pwd)"
have_wheel() {  # FILE SHA256
  [ -f "$wheels/$1" ] && echo "$2  $wheels/$1" | sha256sum --check --status
}
if ! have_wheel "$nvrtc_wheel" "$nvrtc_sha256" || ! have_wheel "$nvcc_wheel" "$nvcc_sha256" ||
   ! have_wheel "$runtime_wheel" "$runtime_sha256"; then
  # pip from a venv of its own: Debian's python3 has no pip (python3-venv brings one).
  [ -x "$dir/.pip-venv/bin/python" ] || "$python" -m venv "$dir/.pip-venv" >&2
  "$dir/.pip-venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: \
    --platform manylinux2014_x86_64 --dest "$wheels" \
    "nvidia-cuda-nvrtc-cu12==$nvrtc_version" "nvidia-cuda-nvcc-cu12==$nvcc_version" \
    "nvidia-cuda-runtime-cu12==$runtime_version" >&2
fi
for pair in "$nvrtc_wheel $nvrtc_sha256" "$nvcc_wheel $nvcc_sha256" "$runtime_wheel $runtime_sha256"; do
  set -- $pair
  if ! have_wheel "$1" "$2"; then
    echo "scripts/nvrtc_toolkit.sh: $wheels/$1 is missing or does not have sha256 $2" >&2
    exit 1
  fi
done

# A fresh layout beside the old one, moved into place last: a killed run leaves no half tree.
new="$dir/.layout.new"
rm -rf "$new"
mkdir -p "$new/unpacked"
for w in "$nvrtc_wheel" "$nvcc_wheel" "$runtime_wheel"; do
  "$python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$wheels/$w" "$new/unpacked"
done
u="$new/unpacked/nvidia"
mkdir -p "$new/bin" "$new/lib64" "$new/include" "$new/nvvm"
cp -p "$u/cuda_nvcc/bin/ptxas" "$new/bin/ptxas"
cp -p "$u"/cuda_nvrtc/lib/libnvrtc* "$new/lib64/"
cp -pR "$u/cuda_runtime/include/." "$new/include/"
cp -pR "$u/cuda_nvcc/include/." "$new/include/"
cp -p "$u/cuda_nvrtc/include/nvrtc.h" "$new/include/"
cp -pR "$u/cuda_nvcc/nvvm/." "$new/nvvm/"
chmod 0755 "$new/bin/ptxas"
rm -rf "$new/unpacked"
# The component versions as a CUDA install's version.json names them.
cat >"$new/version.json" <<EOF
{
  "cuda": { "name": "CUDA NVRTC toolkit (PyPI wheels)", "version": "$nvrtc_version" },
  "cuda_nvrtc": { "name": "CUDA NVRTC", "version": "$nvrtc_version" },
  "cuda_nvcc": { "name": "CUDA NVCC", "version": "$nvcc_version" },
  "cuda_cudart": { "name": "CUDA Runtime (cudart)", "version": "$runtime_version" }
}
EOF
"$new/bin/ptxas" --version | grep -q "V$nvcc_version" || {
  echo "scripts/nvrtc_toolkit.sh: $new/bin/ptxas is not ptxas $nvcc_version" >&2
  exit 1
}
for part in bin lib64 include nvvm version.json; do
  rm -rf "${dir:?}/$part"
  mv "$new/$part" "$dir/$part"
done
rmdir "$new"
echo "$stamp" >"$dir/.kiln-toolkit"
cd "$dir" && pwd
