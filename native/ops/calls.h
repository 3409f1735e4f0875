// One function per native entry point that turns raw arguments (buffers as
// pointer + length, and the descriptor of doubles built by lib/native.ts) into
// a checked, ready-to-run call. Every check that protects memory lives in
// these: shapes against lengths, sizes against overflow, out against aliasing.
// Each op's call struct, prepare function and runCall sit in its own
// <op>_op.h / <op>_op.cc beside its planner, in one pattern; what they share
// (BufferArg, Descriptor, checkNoOverlap) is in call_args.h; this header
// brings them all in. The Node binding only unwraps typed arrays and calls
// these; the native tests and the fuzzer call them directly. A call that
// prepares successfully can run without reading or writing outside its buffers.
// Each call's descriptor holds the fields that descriptor_layouts.h lists for it.
#pragma once

#include <cstdint>

#include "attention_op.h"
#include "cache_append_op.h"
#include "call_args.h"
#include "layernorm_op.h"
#include "matmul_op.h"
#include "pack_op.h"
#include "rope_op.h"
#include "softmax_op.h"
