#!/usr/bin/env bash
# Builds the addon against other Node releases, each with its own headers, and
# runs the tests that exercise the binding layer under that Node. The binding
# calls V8's C++ API (async jobs hold their buffers' memory), whose headers
# change between releases: from Node 23 on they compile only as C++20, which
# binding.gyp switches to by NODE_MODULE_VERSION.
#
# The Node builds come from the npm registry (node-linux-<arch>, the official
# tarballs), so this needs nothing but npm. Usage:
#   scripts/test-node-versions.sh            # Node 22, 24 and 26
#   MHSA_NODE_VERSIONS="24" scripts/test-node-versions.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
versions="${MHSA_NODE_VERSIONS:-22 24 26}"
arch="$(node -p process.arch)"
if [ "$(node -p process.platform)" != linux ]; then
  echo "test-node-versions: the registry's Node builds used here are Linux only; nothing to do"
  exit 0
fi
tests=(test/async.test.ts test/lying-values.test.ts test/worker-threads.test.ts test/result-pool.test.ts test/attention.test.ts test/block.test.ts)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for v in $versions; do
  echo "== Node $v"
  mkdir -p "$work/node$v" "$work/repo$v"
  (cd "$work/node$v" && npm pack --silent "node-linux-$arch@$v" >/dev/null)
  tar xzf "$work/node$v"/*.tgz -C "$work/node$v"
  nodedir="$work/node$v/package"
  # The tracked sources and the installed dev dependencies; the copy's own build/.
  (cd "$root" && git ls-files -z | xargs -0 cp --parents -t "$work/repo$v")
  ln -s "$root/node_modules" "$work/repo$v/node_modules"
  (
    cd "$work/repo$v"
    export PATH="$nodedir/bin:$PATH" npm_config_nodedir="$nodedir"
    echo "node $(node -v), headers from $nodedir"
    node scripts/build-addon.js > build.log 2>&1 || { cat build.log; exit 1; }
    if grep -n "warning" build.log; then echo "test-node-versions: the build warned (above)"; exit 1; fi
    npx tsc -p tsconfig.build.json # dist/, which the child-process tests load
    MHSA_ADDON= npx jest "${tests[@]}"
  )
done
