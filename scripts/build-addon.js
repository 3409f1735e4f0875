#!/usr/bin/env node
// Builds the native addon with node-gyp from binding.gyp, offline: `npm install`
// in a checkout runs it (the prepare script). Installs from the registry never
// do; they take a prebuilt package (docs/design/prebuilds.md).
//
// node-gyp downloads Node's headers unless told where they are. When the
// running Node ships its headers (<prefix>/include/node/node_api.h, true for
// distro and official builds), point node-gyp at that prefix so no download
// is ever attempted.
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const env = { ...process.env };
const prefix = path.resolve(path.dirname(process.execPath), '..');
if (!env.npm_config_nodedir && fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) {
  env.npm_config_nodedir = prefix;
}

function nodeGypScript() {
  try {
    return require.resolve('node-gyp/bin/node-gyp.js', { paths: [root] });
  } catch {
    if (env.npm_config_node_gyp) return env.npm_config_node_gyp;
    return null;
  }
}

const gyp = nodeGypScript();
if (!gyp) {
  console.error('mhsa: node-gyp not found; install it (npm i node-gyp) and rerun `npm run build`.');
  process.exit(1);
}
const jobs = String(Math.max(1, require('node:os').availableParallelism?.() ?? 2));
const result = spawnSync(process.execPath, [gyp, 'rebuild', '--release', '-j', jobs], {
  cwd: root,
  env,
  stdio: 'inherit',
});
if (result.status !== 0) {
  console.error('mhsa: the native build failed (see above). It needs g++ (or clang), make and python3.');
  process.exit(result.status ?? 1);
}

// The objects, the per-ISA static libraries and the dependency files are half
// of what the build leaves (2.1 of 4.4 MB), and nothing reads them again:
// `node-gyp rebuild` starts from scratch every time. build/Release/mhsa.node
// is all the package loads.
const release = path.join(root, 'build', 'Release');
for (const entry of fs.readdirSync(release)) {
  if (entry === 'obj.target' || entry === '.deps' || entry.endsWith('.a')) {
    fs.rmSync(path.join(release, entry), { recursive: true, force: true });
  }
}
