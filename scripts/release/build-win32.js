// The Windows x64 addon (win32-x64), cross-built on Linux with mingw-w64 and
// called from build-prebuilds.js (docs/design/prebuilds.md, "Windows"). No
// node-gyp: it has no MinGW target. The sources are native/sources.json's
// core, binding and x86 kernel groups; the flags and defines are binding.gyp's
// own, read from it. The addon is Node-API only (V8's C++ ABI on Windows is
// MSVC's), so there are no buffer-pinning modules: lib/async-copies.ts keeps
// async calls safe instead.
//   - Node-API comes from a delay-load import library made from
//     node-api-headers' node_api.def, "node.exe"; native/binding/
//     win_delay_load_hook.cc points it at the running executable.
//   - The C++ runtime, libgcc and winpthreads are linked in (-static): only
//     system DLLs are imported.
//   - Every unit is assembled with -muse-unaligned-vector-move: GCC does not
//     realign the Win64 stack for 32- and 64-byte vectors (GCC bug 54412).
//   - Reproducible: no timestamp in the image, objects in a fixed order,
//     sources named relative to the checkout.
'use strict';

const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..');
const CXX = 'x86_64-w64-mingw32-g++-posix';
const tool = (name) => `x86_64-w64-mingw32-${name}`;
/** The DLLs the addon may import: Windows' own. Node-API is delay-loaded from node.exe (not listed by objdump -p). */
const SYSTEM_DLLS = ['kernel32.dll', 'msvcrt.dll'];
const EXPORTS = ['napi_register_module_v1', 'node_api_module_get_api_version_v1'];

/** binding.gyp as data: gyp's files are JSON once comments and trailing commas are gone. */
function readGyp() {
  const text = fs.readFileSync(path.join(root, 'binding.gyp'), 'utf8');
  const json = text.replace(/"(?:[^"\\]|\\.)*"|#[^\n]*/g, (m) => (m[0] === '#' ? '' : m)).replace(/,(\s*[\]}])/g, '$1');
  return JSON.parse(json);
}

/** The flags binding.gyp gives a target (its "<@(var)" references expanded), without -fPIC: a DLL is relocatable anyway. */
function gypFlags(gyp, flags) {
  return flags.flatMap((f) => {
    const m = /^<@\((\w+)\)$/.exec(f);
    return m ? gyp.variables[m[1]] : [f];
  }).filter((f) => f !== '-fPIC');
}

/**
 * Each source with its compile flags, in sources.json's order: the addon's own
 * sources as binding.gyp's mhsa target on x64, each x86 kernel group as the
 * static library of that group.
 */
function compileJobs(objDir) {
  const gyp = readGyp();
  const sources = JSON.parse(fs.readFileSync(path.join(root, 'native', 'sources.json'), 'utf8'));
  const targets = gyp.conditions.flatMap(([, body]) => body.targets ?? []);
  const mhsa = targets.find((t) => t.target_name === 'mhsa');
  const x64 = mhsa.conditions.find(([cond]) => cond === "target_arch=='x64'")[1];
  const includes = [path.relative(root, require('node-addon-api').include_dir), 'node_modules/node-api-headers/include'];
  const common = ['-Wa,-muse-unaligned-vector-move', ...includes.map((i) => `-I${i}`), ...gyp.target_defaults.defines.map((d) => `-D${d}`)];
  const releaseFlags = gypFlags(gyp, ['<@(mhsa_release_flags)']);
  // node-gyp defines BUILDING_NODE_EXTENSION for an addon (Node-API's declarations become dllimport);
  // node-addon-api's node_addon_api_except target, NODE_ADDON_API_CPP_EXCEPTIONS. Not
  // MHSA_LINKED_BUFFER_PINNING: mhsa_node_api_only, as for every prebuilt addon.
  const addonDefines = ['BUILDING_NODE_EXTENSION', 'NODE_ADDON_API_CPP_EXCEPTIONS', ...x64.defines].map((d) => `-D${d}`);
  const jobs = [];
  const add = (source, flags) => jobs.push({ source, object: path.join(objDir, `${source.replace(/[/\\]/g, '_')}.o`), flags: [...common, ...flags] });
  for (const s of [...sources.core, ...sources.binding, ...sources.win32Prebuild]) add(s, [...releaseFlags, ...addonDefines]);
  for (const dep of x64.dependencies) {
    const target = targets.find((t) => t.target_name === dep);
    const group = /\.(\w+)\.join/.exec(target.sources[0])[1];
    for (const s of sources[group]) add(s, gypFlags(gyp, target.cflags_cc));
  }
  return jobs;
}

/** Runs the compile jobs, os.availableParallelism() at a time; rejects on the first failure. */
async function compileAll(jobs) {
  const queue = [...jobs];
  const worker = async () => {
    for (let job; (job = queue.shift()); ) {
      await new Promise((resolve, reject) => {
        const child = spawn(CXX, [...job.flags, '-c', job.source, '-o', job.object], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
        child.on('error', reject);
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`build-win32: ${CXX} failed on ${job.source}`))));
      });
    }
  };
  await Promise.all(Array.from({ length: os.availableParallelism() }, worker));
}

function output(cmd, args, options) {
  return execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28, ...options });
}

/** binutils 2.38 is the first assembler with -muse-unaligned-vector-move. */
function checkAssembler() {
  const m = /(\d+)\.(\d+)/.exec(output(tool('as'), ['--version']).split('\n')[0]);
  if (!m || Number(m[1]) * 100 + Number(m[2]) < 238) {
    throw new Error(`build-win32: ${tool('as')} is binutils ${m ? m[0] : '?'}; -muse-unaligned-vector-move needs 2.38 or later`);
  }
}

/** The names a .def file's EXPORTS section lists. */
function defSymbols(file) {
  const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/).map((l) => l.trim());
  return lines.slice(lines.indexOf('EXPORTS') + 1).filter((l) => l !== '' && !l.startsWith(';'));
}

/**
 * The delay-load import library of Node-API: node_api.def lists every function node.exe exports for
 * addons (js_native_api.def's too, checked here), under the module name "node.exe".
 */
function nodeImportLibrary(dir) {
  const defs = path.join(root, 'node_modules', 'node-api-headers', 'def');
  const nodeApi = new Set(defSymbols(path.join(defs, 'node_api.def')));
  const missing = defSymbols(path.join(defs, 'js_native_api.def')).filter((s) => !nodeApi.has(s));
  if (missing.length > 0) throw new Error(`build-win32: node_api.def lacks js_native_api's ${missing.join(', ')}`);
  // Run in dir with a relative name: dlltool names the library's helper symbols after its output path.
  execFileSync(tool('dlltool'), ['-d', path.join(defs, 'node_api.def'), '-y', 'libnode-delay.a', '-D', 'node.exe'], { cwd: dir });
  return { lib: path.join(dir, 'libnode-delay.a'), symbols: nodeApi };
}

/** What the linked DLL imports and exports, and that no 32- or 64-byte vector move asks for alignment. */
function checkImage(file, mapFile, nodeApi) {
  const headers = output(tool('objdump'), ['-p', file]);
  const dlls = [...headers.matchAll(/DLL Name: (\S+)/g)].map((m) => m[1]);
  const foreign = dlls.filter((d) => !SYSTEM_DLLS.includes(d.toLowerCase()));
  if (foreign.length > 0) throw new Error(`build-win32: mhsa.node imports ${foreign.join(', ')}; only ${SYSTEM_DLLS.join(', ')} may be`);
  const table = headers.slice(headers.indexOf('[Ordinal/Name Pointer] Table')).split('\n\n')[0];
  const exported = [...table.matchAll(/^\s*\[\s*\d+\] (\w+)/gm)].map((m) => m[1]);
  if (exported.join() !== EXPORTS.join()) throw new Error(`build-win32: mhsa.node exports ${exported.join(', ')}, not ${EXPORTS.join(', ')}`);
  // The linker map names each import library member pulled in, and the symbol that pulled it.
  // Each function is reached through its __imp_ pointer (dllimport); __tailMerge_ and _iname are the library's own.
  const delayed = [...fs.readFileSync(mapFile, 'utf8').matchAll(/libnode-delay\.a\(\S+\)\s+\S+ \((\w+)\)/g)]
    .map((m) => m[1].replace(/^__imp_/, ''))
    .filter((s) => !/^__tailMerge_|_iname$/.test(s));
  const unknown = delayed.filter((s) => !nodeApi.has(s));
  if (unknown.length > 0) throw new Error(`build-win32: symbols from node.exe outside Node-API: ${unknown.join(', ')}`);
  const aligned = output(tool('objdump'), ['-d', '--no-show-raw-insn', file])
    .split('\n')
    .filter((l) => /\svmov(aps|apd|dqa|dqa32|dqa64)\s/.test(l) && /%[yz]mm/.test(l) && l.includes('('));
  if (aligned.length > 0) throw new Error(`build-win32: aligned 32/64-byte vector moves to memory:\n${aligned.slice(0, 5).join('\n')}`);
  return { dlls, delayed: new Set(delayed).size };
}

/** Builds mhsa.node for win32-x64 in dir (scratch) and copies it to out. */
function buildWin32(dir, out) {
  checkAssembler();
  fs.rmSync(dir, { recursive: true, force: true });
  const objDir = path.join(dir, 'obj');
  fs.mkdirSync(objDir, { recursive: true });
  const jobs = compileJobs(objDir);
  const jobsFile = path.join(dir, 'jobs.json');
  fs.writeFileSync(jobsFile, JSON.stringify(jobs));
  // The compiles run in parallel in a child (this function is synchronous, as build-prebuilds.js is).
  execFileSync(process.execPath, [__filename, '--compile', jobsFile], { stdio: ['ignore', 'inherit', 'inherit'] });
  const nodeApi = nodeImportLibrary(dir);
  // Linked in dir with relative names: ld derives the DLL's preferred base address from the output's name.
  execFileSync(CXX, ['-shared', '-static', '-static-libgcc', '-static-libstdc++', '-s', '-Wl,--no-insert-timestamp',
    '-Wl,-Map=mhsa.map', '-o', 'mhsa.node', ...jobs.map((j) => path.relative(dir, j.object)), path.relative(dir, nodeApi.lib)],
  { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] });
  const image = path.join(dir, 'mhsa.node');
  const { dlls, delayed } = checkImage(image, path.join(dir, 'mhsa.map'), nodeApi.symbols);
  console.log(`win32-x64: mhsa.node imports ${dlls.join(', ')}, and ${delayed} Node-API functions delay-loaded from node.exe`);
  fs.copyFileSync(image, path.join(out, 'mhsa.node'));
}

if (require.main === module && process.argv[2] === '--compile') {
  compileAll(JSON.parse(fs.readFileSync(process.argv[3], 'utf8'))).catch((e) => {
    console.error(e.message);
    process.exit(1);
  });
}

module.exports = { buildWin32, CXX };
