// The Windows prebuilt addon only (scripts/release/build-win32.js; docs/design/prebuilds.md).
// mhsa.node takes Node-API from the module named "node.exe", through a delay-load table: Windows
// resolves an import by module name, and Node-API is exported by whatever executable runs the
// addon, which is not always called node.exe (a renamed node.exe, Electron, a Node built as
// libnode.dll). Before the first Node-API call loads "node.exe", this hook hands the delay-load
// helper libnode.dll when the process has it, and the process's own executable otherwise, as
// node-gyp's win_delay_load_hook.cc does for MSVC builds.
#if defined(_WIN32)
#include <windows.h>
// windows.h first: delayimp.h uses its types.
#include <delayimp.h>
#include <string.h>

namespace {

FARPROC WINAPI loadHost(unsigned event, PDelayLoadInfo info) {
  if (event != dliNotePreLoadLibrary || _stricmp(info->szDll, "node.exe") != 0) return nullptr;
  if (HMODULE libnode = GetModuleHandleA("libnode.dll")) return reinterpret_cast<FARPROC>(libnode);
  return reinterpret_cast<FARPROC>(GetModuleHandleA(nullptr));
}

}  // namespace

// The delay-load helper (MinGW's libmingwex, MSVC's delayimp.lib) calls this hook, when set, before it acts.
PfnDliHook __pfnDliNotifyHook2 = loadHost;  // extern "C": declared so in delayimp.h
#endif
