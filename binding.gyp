{
  # Sources come from native/sources.json, the list CMakeLists.txt reads too.
  "variables": {
    # -ffp-contract=off: GCC fuses a multiply and an add into an FMA in C++ by
    # default, so two kernels with the same epilogue (alpha * sum, then + c or
    # the bias, rounded separately: kernel_table.h) gave different bits.
    "mhsa_release_flags": ["-O3", "-fPIC", "-std=c++17", "-ffp-contract=off"],
    # Node's own -std (gnu++17 up to Node 22, gnu++20 from 23), replaced by ours.
    "mhsa_node_std": ["-std=gnu++17", "-std=gnu++20"]
  },
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
      "defines": ["NAPI_VERSION=8", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
      "cflags_cc": ["<@(mhsa_release_flags)"],
      "cflags_cc!": ["<@(mhsa_node_std)"],
      "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-O3", "-std=c++17", "-ffp-contract=off"]},
      "conditions": [
        # V8's headers from Node 23 on (NODE_MODULE_VERSION 131) compile only
        # as C++20, and async_job.cc includes them to hold a buffer's memory
        # while a job runs (info().pinsAsyncBuffers). The kernels stay C++17.
        ["node_module_version >= 131", {
          "cflags_cc!": ["-std=c++17"],
          "cflags_cc": ["-std=c++20"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS!": ["-std=c++17"], "OTHER_CPLUSPLUSFLAGS": ["-std=c++20"]}
        }],
        ["target_arch=='x64'", {
          "defines": ["MHSA_HAVE_X86_KERNELS"],
          "dependencies": ["mhsa_avx2", "mhsa_avx512"]
        }]
      ]
    }
  ],
  "conditions": [
    ["target_arch=='x64'", {
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
        }
      ]
    }]
  ]
}
