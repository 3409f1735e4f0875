#!/usr/bin/env node
// Builds the native addon with node-gyp from binding.gyp, offline: `npm install`
// in a checkout runs it (the prepare script), and so does `npm run build`, which
// after the first build recompiles only what changed. Installs from the registry
// never do; they take a prebuilt package (docs/design/prebuilds.md).
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

// Incremental when it can be: make rebuilds only the objects whose sources or
// headers changed (node-gyp's .deps files track the headers). It reconfigures
// from scratch when binding.gyp or the source list is newer than the Makefile,
// or when another Node (its headers, its ABI) configured the last build.
const build = path.join(root, 'build');
const stampFile = path.join(build, 'mhsa-configured-by.txt');
const stamp = `${process.execPath} ${process.version} ${env.npm_config_nodedir ?? ''}\n`;
const mtime = (f) => (fs.existsSync(f) ? fs.statSync(f).mtimeMs : Infinity);
const configured =
  fs.existsSync(path.join(build, 'Makefile')) &&
  fs.existsSync(stampFile) &&
  fs.readFileSync(stampFile, 'utf8') === stamp &&
  ['binding.gyp', path.join('native', 'sources.json')].every((f) => mtime(path.join(root, f)) <= mtime(path.join(build, 'Makefile')));

function nodeGyp(args) {
  const result = spawnSync(process.execPath, [gyp, ...args], { cwd: root, env, stdio: 'inherit' });
  if (result.status !== 0) {
    console.error('mhsa: the native build failed (see above). It needs g++ (or clang), make and python3.');
    process.exit(result.status ?? 1);
  }
}

if (configured) {
  nodeGyp(['build', '--release', '-j', jobs]);
} else {
  nodeGyp(['rebuild', '--release', '-j', jobs]);
  fs.writeFileSync(stampFile, stamp);
}
