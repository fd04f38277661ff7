// The guard against a control block cut short under the controller.
//
// A job's block is a file its user owns (shared_control_block.h), so the user
// may ftruncate it at any moment; the controller's next access to a page past
// the new end is a SIGBUS, which would end gandivad for every user. With the
// guard on, a SIGBUS inside a registered block puts private zero pages where
// the block was mapped (the shared view is gone: nothing the user writes
// reaches us from then on), marks that block cut, and lets the access go on.
// Any other SIGBUS goes to the handler that was there before.
//
// The registry is a fixed table of lock-free slots, as the handler may only
// read atomics; a block registered while the table is full is not guarded
// (Register returns -1).
#ifndef GANDIVA_CONTRACT_SHRINK_GUARD_H_
#define GANDIVA_CONTRACT_SHRINK_GUARD_H_

#include <cstddef>

#include "gandiva/status.h"

namespace gandiva::runtime::shrink_guard {

// Installs the SIGBUS handler (once; later calls do nothing).
Status Install();
// Guards [begin, begin + length) (page-aligned); returns the slot, or -1.
int Register(void* begin, size_t length);
// Stops guarding the slot's range (before it is unmapped).
void Unregister(int slot);
// Whether a SIGBUS was taken in the slot's range.
bool WasCut(int slot);

}  // namespace gandiva::runtime::shrink_guard

#endif  // GANDIVA_CONTRACT_SHRINK_GUARD_H_
