{
  # Sources come from native/sources.json, the list CMakeLists.txt reads too.
  "variables": {
    # -ffp-contract=off: GCC fuses a multiply and an add into an FMA in C++ by
    # default, so two kernels with the same epilogue (alpha * sum, then + c or
    # the bias, rounded separately: kernel_table.h) gave different bits.
    # -fvisibility=hidden: only the Node-API entry points are exported. Otherwise
    # the statics of inline functions (the per-thread scratch) are GNU unique
    # symbols, which the dynamic linker binds across every loaded copy of mhsa,
    # RTLD_LOCAL or not: two versions in one process shared one scratch table
    # of different layouts and corrupted the heap.
    "mhsa_release_flags": ["-O3", "-fPIC", "-std=c++17", "-ffp-contract=off", "-fvisibility=hidden"],
    # Node's own -std (gnu++17 up to Node 22, gnu++20 from 23), replaced by ours.
    "mhsa_node_std": ["-std=gnu++17", "-std=gnu++20"],
    # The prebuilt packages' binaries (scripts/release/build-prebuilds.js sets
    # these with `node-gyp configure -- -D<name>=1`; docs/design/prebuilds.md):
    # mhsa_prebuild      links for glibc 2.28 and later and any libstdc++;
    # mhsa_node_api_only the addon without V8's API, so one binary serves
    #                    every Node ABI (async buffer pinning comes from:)
    # mhsa_pinning_module only the buffer-pinning module, built per Node ABI.
    "mhsa_prebuild%": 0,
    "mhsa_node_api_only%": 0,
    "mhsa_pinning_module%": 0,
    "mhsa_linux_prebuild_ldflags": [
      "-static-libstdc++", "-Wl,--exclude-libs,ALL", "-s",
      # Never unmapped: a worker that loads them and exits would otherwise unload them under
      # the main thread's pointers to the pinning table and the result pool's deleter.
      "-Wl,-z,nodelete",
      "<!@(node -p \"require('./native/sources.json').linuxPrebuildWrapped.map((s) => '-Wl,--wrap=' + s).join(' ')\")"
    ]
  },
  # The addon and the pinning module (not the kernels' static libraries).
  "target_defaults": {
    "defines": ["NAPI_VERSION=8", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
    # target_conditions see only a target's own variables.
    "variables": {
      "mhsa_node_module_version": "<(node_module_version)",
      "mhsa_linux_prebuild": "<(mhsa_prebuild)"
    },
    "target_conditions": [
      ["_type!='static_library'", {
        "cflags_cc": ["<@(mhsa_release_flags)"],
        "cflags_cc!": ["<@(mhsa_node_std)"],
        "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-O3", "-std=c++17", "-ffp-contract=off"]}
      }],
      # V8's headers from Node 23 on (NODE_MODULE_VERSION 131) compile only
      # as C++20, and buffer_pinning_v8.cc includes them to hold a buffer's
      # memory while a job runs (info().pinsAsyncBuffers). The x86 kernels, in
      # their own static libraries, stay C++17.
      ["_type!='static_library' and mhsa_node_module_version >= 131", {
        "cflags_cc!": ["-std=c++17"],
        "cflags_cc": ["-std=c++20"],
        "xcode_settings": {"OTHER_CPLUSPLUSFLAGS!": ["-std=c++17"], "OTHER_CPLUSPLUSFLAGS": ["-std=c++20"]}
      }],
      # Loads on glibc 2.28 and later with any libstdc++: the C++ runtime is
      # linked in and hidden, and the symbols that would ask for a newer glibc
      # are pinned to their first versions (native/runtime/glibc_compat.cc).
      ["_type!='static_library' and mhsa_linux_prebuild==1 and OS=='linux'", {
        "sources": ["<!@(node -p \"require('./native/sources.json').linuxPrebuild.join(' ')\")"],
        "ldflags": ["<@(mhsa_linux_prebuild_ldflags)"]
      }]
    ]
  },
  "conditions": [
    ["mhsa_pinning_module==0", {
      "targets": [
        {
          "target_name": "mhsa",
          "sources": [
            "<!@(node -p \"require('./native/sources.json').core.join(' ')\")",
            "<!@(node -p \"require('./native/sources.json').binding.join(' ')\")"
          ],
          "dependencies": [
            "<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"
          ],
          "conditions": [
            ["target_arch=='x64'", {
              "defines": ["MHSA_HAVE_X86_KERNELS"],
              "dependencies": ["mhsa_avx2", "mhsa_avx512", "mhsa_avx512bf16", "mhsa_amx"]
            }],
            ["mhsa_node_api_only==0", {
              "sources": ["<!@(node -p \"require('./native/sources.json').bufferPinning.join(' ')\")"],
              "defines": ["MHSA_LINKED_BUFFER_PINNING"]
            }]
          ]
        }
      ]
    }],
    ["mhsa_pinning_module==1", {
      "targets": [
        {
          "target_name": "mhsa_buffer_pinning",
          "sources": ["<!@(node -p \"require('./native/sources.json').bufferPinning.join(' ')\")"],
          "defines": ["MHSA_BUFFER_PINNING_MODULE"]
        }
      ]
    }],
    ["target_arch=='x64' and mhsa_pinning_module==0", {
      "targets": [
        {
          "target_name": "mhsa_avx2",
          "type": "static_library",
          "sources": ["<!@(node -p \"require('./native/sources.json').avx2.join(' ')\")"],
          "cflags_cc": ["<@(mhsa_release_flags)", "-mavx2", "-mfma"],
          "cflags_cc!": ["<@(mhsa_node_std)"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-O3", "-ffp-contract=off", "-mavx2", "-mfma"]}
        },
        {
          "target_name": "mhsa_avx512",
          "type": "static_library",
          "sources": ["<!@(node -p \"require('./native/sources.json').avx512.join(' ')\")"],
          "cflags_cc": ["<@(mhsa_release_flags)", "-mavx512f", "-mavx512vl", "-mavx512bw",
                        "-mavx512dq", "-mfma", "-mprefer-vector-width=512"],
          "cflags_cc!": ["<@(mhsa_node_std)"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-O3", "-ffp-contract=off", "-mavx512f", "-mavx512vl", "-mavx512bw",
                                                      "-mavx512dq", "-mfma"]}
        },
        {
          "target_name": "mhsa_avx512bf16",
          "type": "static_library",
          "sources": ["<!@(node -p \"require('./native/sources.json').avx512bf16.join(' ')\")"],
          "cflags_cc": ["<@(mhsa_release_flags)", "-mavx512f", "-mavx512vl", "-mavx512bw",
                        "-mavx512dq", "-mfma", "-mavx512bf16", "-mprefer-vector-width=512"],
          "cflags_cc!": ["<@(mhsa_node_std)"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-O3", "-ffp-contract=off", "-mavx512f", "-mavx512vl", "-mavx512bw",
                                                      "-mavx512dq", "-mfma", "-mavx512bf16"]}
        },
        {
          "target_name": "mhsa_amx",
          "type": "static_library",
          "sources": ["<!@(node -p \"require('./native/sources.json').amx.join(' ')\")"],
          "cflags_cc": ["<@(mhsa_release_flags)", "-mavx512f", "-mavx512vl", "-mavx512bw",
                        "-mavx512dq", "-mfma", "-mamx-tile", "-mamx-bf16", "-mprefer-vector-width=512"],
          "cflags_cc!": ["<@(mhsa_node_std)"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-O3", "-ffp-contract=off", "-mavx512f", "-mavx512vl", "-mavx512bw",
                                                      "-mavx512dq", "-mfma", "-mamx-tile", "-mamx-bf16"]}
        }
      ]
    }]
  ]
}
