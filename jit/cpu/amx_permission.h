// Linux gates AMX tile data behind a per-process permission (arch_prctl):
//   GET supported features -> REQ XTILEDATA -> GET permitted features, once per process.
#pragma once

#include <string>

namespace qforge {

// Returns true when the process may execute AMX instructions; otherwise fills *reason
// (e.g. "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: Operation not supported").
// The request is made once; later calls return the cached answer.
bool request_amx_permission(std::string* reason);

}  // namespace qforge
