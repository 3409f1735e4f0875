#!/usr/bin/env node
// npm run release:pack: every package's tarball in release/ (docs/design/prebuilds.md).
//   node scripts/release/pack.js [platform...]     default: every platform in lib/load-addon.ts, and wasm32
// - one platform package per prebuilt platform (@mhsa/linux-x64-gnu, ...): the
//   addons from build-prebuilds.js, with os, cpu and libc, and no scripts;
// - @mhsa/wasm32, for every other platform: mhsa.wasm from build-wasm.js and
//   emnapi's two runtime files (MIT), with no os or cpu, so it installs
//   everywhere; the loader takes it only where no native package fits
//   (docs/design/wasm.md);
// - mhsa itself: what `npm pack` takes from this checkout (dist/, no native
//   sources, no install script), with the platform packages written into its
//   optionalDependencies at its own version. They are added here, not in the
//   checkout's package.json, because the registry has none of them for
//   `npm ci` to find while developing.
'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { buildPlatform } = require('./build-prebuilds');
const { buildWasm } = require('./build-wasm');

const root = path.resolve(__dirname, '..', '..');
const release = path.join(root, 'release');
const main = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

/** npm pack of dir into release/; returns the tarball's path. */
function npmPack(dir) {
  const [info] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', release], { cwd: dir, encoding: 'utf8' }),
  );
  return path.join(release, info.filename);
}

function packPlatform(platform, name) {
  const [osName, cpu] = platform.split('-');
  const dir = path.join(release, 'packages', platform);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(buildPlatform(platform), dir, { recursive: true });
  const pkg = {
    name,
    version: main.version,
    description: `The prebuilt native addon of mhsa for ${platform}${osName === 'linux' ? ' (glibc 2.28 and later)' : ''}`,
    license: main.license,
    os: [osName],
    cpu: [cpu],
    ...(osName === 'linux' ? { libc: ['glibc'] } : {}),
    engines: main.engines,
    files: ['*.node'],
  };
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.copyFileSync(path.join(root, 'LICENSE'), path.join(dir, 'LICENSE'));
  fs.writeFileSync(
    path.join(dir, 'README.md'),
    `# ${name}\n\nThe native addon of [mhsa](https://www.npmjs.com/package/mhsa) for ${platform}. ` +
      'Install `mhsa`, not this package: npm, pnpm and yarn pick the one that fits the machine.\n',
  );
  return npmPack(dir);
}

/** emnapi's runtime, as the wasm package ships it: its two self-contained (UMD) builds. */
const EMNAPI_FILES = {
  'emnapi-core.min.js': ['@emnapi/core', 'dist/emnapi-core.min.js'],
  'emnapi-runtime.min.js': ['@emnapi/runtime', 'dist/emnapi.min.js'],
};

async function packWasm(name) {
  const dir = path.join(release, 'packages', 'wasm32');
  fs.rmSync(dir, { recursive: true, force: true });
  await buildWasm(dir);
  const notices = [];
  for (const [file, [pkgName, rel]] of Object.entries(EMNAPI_FILES)) {
    const pkgDir = path.join(root, 'node_modules', pkgName); // their exports hide package.json
    fs.copyFileSync(path.join(pkgDir, rel), path.join(dir, file));
    const { version } = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
    notices.push(`${file}: ${pkgName} ${version} (${rel})\n\n${fs.readFileSync(path.join(pkgDir, 'LICENSE'), 'utf8').trim()}\n`);
  }
  fs.writeFileSync(path.join(dir, 'THIRD-PARTY-NOTICES'), notices.join('\n'));
  const pkg = {
    name,
    version: main.version,
    description: 'The WebAssembly build of mhsa, for the platforms without a native one (macOS, Windows on arm64, musl, other CPUs)',
    license: main.license,
    engines: main.engines,
    files: ['mhsa.wasm', ...Object.keys(EMNAPI_FILES), 'THIRD-PARTY-NOTICES'],
  };
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.copyFileSync(path.join(root, 'LICENSE'), path.join(dir, 'LICENSE'));
  fs.writeFileSync(
    path.join(dir, 'README.md'),
    `# ${name}\n\nThe WebAssembly build of [mhsa](https://www.npmjs.com/package/mhsa), which it runs where no native ` +
      'package fits. Install `mhsa`, not this package.\n',
  );
  return npmPack(dir);
}

function packMain(platformPackages) {
  const dir = path.join(release, 'packages', 'mhsa');
  fs.rmSync(dir, { recursive: true, force: true });
  const [listing] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' }));
  for (const { path: file } of listing.files) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.copyFileSync(path.join(root, file), path.join(dir, file));
  }
  const pkg = { ...main, optionalDependencies: Object.fromEntries(platformPackages.map((name) => [name, main.version])) };
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  return npmPack(dir);
}

function sizeKB(file) {
  return `${(fs.statSync(file).size / 1024).toFixed(0)} kB`;
}

async function packAll() {
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  const { PREBUILT_PLATFORMS, WASM_PACKAGE } = require(path.join(root, 'dist', 'lib', 'load-addon.js'));
  const asked = process.argv.slice(2);
  const all = [...Object.keys(PREBUILT_PLATFORMS), 'wasm32'];
  const platforms = asked.length > 0 ? asked : all;
  for (const p of platforms) if (!all.includes(p)) throw new Error(`release:pack: ${p} is not wasm32 nor in lib/load-addon.ts`);
  fs.mkdirSync(release, { recursive: true });
  for (const f of fs.readdirSync(release)) if (f.endsWith('.tgz')) fs.rmSync(path.join(release, f));
  const names = platforms.map((p) => (p === 'wasm32' ? WASM_PACKAGE : PREBUILT_PLATFORMS[p]));
  const tarballs = [];
  for (const [i, p] of platforms.entries()) tarballs.push(p === 'wasm32' ? await packWasm(names[i]) : packPlatform(p, names[i]));
  tarballs.unshift(packMain(names));
  for (const t of tarballs) console.log(`${path.relative(root, t)}  ${sizeKB(t)}`);
}

if (require.main === module) {
  packAll().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
