// Which threads hold AMX tile state, and handing it back.
//
//   thread runs an AMX kernel      -> note_amx_tiles_in_use()   (the kernel itself loads
//                                     its tile configuration when the live one differs)
//   thread runs a non-AMX kernel   -> release_amx_tiles()       tilerelease, once
//
// A thread that went back to the zmm kernels (decode after an AMX prefill) thus returns
// its tiles to the INIT state, so the OS no longer saves and restores 8 KiB of tile data
// on its context switches.
#pragma once

namespace qforge {

void note_amx_tiles_in_use();
// Runs tilerelease when this thread noted tile use since its last release (a thread-local
// flag: free when it did not).
void release_amx_tiles();

}  // namespace qforge
